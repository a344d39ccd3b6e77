#include "kernel_cases.h"

#include <cstring>
#include <sstream>

#include "base/datatype.h"

namespace loomgpu {
namespace {

using loom::PostOpKind;
using loom::ReduceKind;
using loom::ReduceOp;

constexpr loomDataType_t kDtypes[] = {loomInt8,   loomUint8,   loomInt32,   loomUint32,     loomInt64,     loomUint64,
                                      loomFloat16, loomFloat32, loomFloat64, loomBfloat16, loomFloat8e4m3, loomFloat8e5m2};

uint64_t next(uint64_t& x) {
  x += 0x9E3779B97F4A7C15ull;
  uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Random bits, but a quarter of the floats are small integers so that sums and products are mostly
// ordinary numbers rather than NaN and infinity.
std::vector<uint8_t> randomImage(loomDataType_t dtype, size_t elems, uint64_t seed) {
  const size_t es = loom::dataTypeSize(dtype);
  std::vector<uint8_t> v(elems * es);
  uint64_t x = seed;
  for (size_t i = 0; i < elems; ++i) {
    uint64_t bits = next(x);
    if (loom::isFloatingType(dtype) && (bits & 3) == 0) {
      float f = static_cast<float>(static_cast<int>((bits >> 8) % 17) - 8);
      if (dtype == loomFloat64) {
        double d = f;
        std::memcpy(&bits, &d, 8);
      } else {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        // A short float's top bits: exact for small integers in every narrow format but e4m3/e5m2,
        // where they are simply other bit patterns.
        bits = dtype == loomFloat32 ? u : (es == 2 ? (u >> 16) : (u >> 24));
      }
    }
    std::memcpy(v.data() + i * es, &bits, es);
  }
  return v;
}

bool isNanElem(loomDataType_t dtype, const uint8_t* p) {
  if (dtype == loomFloat32) {
    float f;
    std::memcpy(&f, p, 4);
    return f != f;
  }
  if (dtype == loomFloat64) {
    double d;
    std::memcpy(&d, p, 8);
    return d != d;
  }
  return false;
}

std::string hexElem(const uint8_t* p, size_t es) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, es);
  std::ostringstream os;
  os << "0x" << std::hex << bits;
  return os.str();
}

ReduceOp makeOp(ReduceKind kind, PostOpKind post, loomDataType_t dtype, uint64_t variant) {
  ReduceOp op;
  op.kind = kind;
  op.post = post;
  op.divisor = variant % 3 == 0 ? 3 : (variant % 3 == 1 ? 4 : 0);  // 0 acts as 1
  op.scalar = loom::isFloatingType(dtype) ? (variant & 1 ? 0.5 : -3.25) : 1.0;
  op.intScalar = variant & 1 ? -3 : 7;
  return op;
}

}  // namespace

std::string describe(const KernelCase& c) {
  static const char* kinds[] = {"sum", "prod", "max", "min"};
  static const char* posts[] = {"none", "divide", "multiply"};
  std::ostringstream os;
  os << (c.copy ? "copy" : "reduce") << " " << loom::dataTypeName(c.dtype);
  if (!c.copy) os << " " << kinds[static_cast<int>(c.op.kind)];
  os << " post=" << posts[static_cast<int>(c.op.post)] << " finalize=" << c.finalize << " count=" << c.count
     << " offsets(a,b,dst)=" << c.offsetA << "," << c.offsetB << "," << c.offsetDst << " inplace=" << c.inPlace;
  return os.str();
}

std::vector<KernelCase> kernelCases() {
  const size_t counts[] = {0, 1, 7, 16, 33, 1000, 4099};
  std::vector<KernelCase> cases;
  uint64_t seed = 1;
  for (loomDataType_t dtype : kDtypes) {
    const size_t es = loom::dataTypeSize(dtype);
    const size_t shifted = es == 8 ? 1 : 16 / es / 2 + 1;  // a misalignment the element size allows
    struct Offsets {
      size_t a, b, dst;
    };
    const Offsets offsets[] = {{0, 0, 0}, {shifted, shifted, shifted}, {0, shifted, 0}};
    for (size_t count : counts) {
      for (const Offsets& off : offsets) {
        for (int kind = 0; kind < 4; ++kind) {
          for (int post = 0; post < 3; ++post) {
            for (bool finalize : {false, true}) {
              if (!finalize && post != 0 && kind != 0) continue;  // an unapplied post-op: once is enough
              KernelCase c;
              c.dtype = dtype;
              c.op = makeOp(static_cast<ReduceKind>(kind), static_cast<PostOpKind>(post), dtype, seed);
              c.finalize = finalize;
              c.count = count;
              c.offsetA = off.a, c.offsetB = off.b, c.offsetDst = off.dst;
              c.inPlace = (seed % 4 == 0) && off.a == off.dst;
              c.seed = seed++;
              cases.push_back(c);
              if (kind == 0) {  // copies: post-op applied or a plain copy
                KernelCase k = c;
                k.copy = true;
                k.seed = seed++;
                cases.push_back(k);
              }
            }
          }
        }
      }
    }
  }
  return cases;
}

std::string checkAgainstCpu(const std::vector<KernelCase>& cases, const BufferAccess& access,
                            const KernelUnderTest& kernel) {
  std::string out;
  int failures = 0;
  for (const KernelCase& c : cases) {
    const size_t es = loom::dataTypeSize(c.dtype);
    const size_t span = c.count + 16;
    const std::vector<uint8_t> a = randomImage(c.dtype, span, c.seed * 3 + 1);
    const std::vector<uint8_t> b = randomImage(c.dtype, span, c.seed * 3 + 2);
    const std::vector<uint8_t> d = randomImage(c.dtype, span, c.seed * 3 + 3);

    // The CPU result (on copies of the same images, same offsets).
    std::vector<uint8_t> expect = c.inPlace ? a : d;
    const size_t dstOff = (c.inPlace ? c.offsetA : c.offsetDst) * es;
    if (c.copy)
      loom::copyArray(expect.data() + dstOff, a.data() + c.offsetA * es, c.count, c.dtype, c.op, c.finalize);
    else
      loom::reduceArrays(expect.data() + dstOff, a.data() + c.offsetA * es, b.data() + c.offsetB * es, c.count,
                         c.dtype, c.op, c.finalize);

    char* pa = static_cast<char*>(access.place(a));
    char* pb = c.copy ? nullptr : static_cast<char*>(access.place(b));
    char* pd = c.inPlace ? pa : static_cast<char*>(access.place(d));
    std::string error = kernel(c, pa + c.offsetA * es, pb ? pb + c.offsetB * es : nullptr, pd + dstOff);
    std::vector<uint8_t> got = error.empty() ? access.fetch(pd, span * es) : std::vector<uint8_t>{};
    access.freeAll();

    if (error.empty()) {
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < span; ++i) {
        const uint8_t* e = expect.data() + i * es;
        const uint8_t* g = got.data() + i * es;
        if (std::memcmp(e, g, es) == 0 || (isNanElem(c.dtype, e) && isNanElem(c.dtype, g))) continue;
        if (bad++ == 0) first = i;
      }
      if (bad == 0) continue;
      std::ostringstream os;
      os << bad << " element(s) differ, first at buffer index " << first << " (dst starts at "
         << dstOff / es << "): expected " << hexElem(expect.data() + first * es, es) << " got "
         << hexElem(got.data() + first * es, es);
      error = os.str();
    }
    if (failures++ < 8) out += "\n  " + describe(c) + ": " + error;
  }
  if (failures > 8) out += "\n  ... and " + std::to_string(failures - 8) + " more";
  if (failures) out = std::to_string(failures) + " of " + std::to_string(cases.size()) + " kernel cases failed:" + out;
  return out;
}

}  // namespace loomgpu
