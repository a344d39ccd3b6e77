#include "base/conf_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace loom {
namespace {

std::string_view trimmedBlanks(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const size_t last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

bool isVariableName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name)
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

}  // namespace

ConfFile parseConfText(std::string path, std::string_view text) {
  ConfFile file;
  file.path = std::move(path);
  int number = 0;
  while (!text.empty()) {
    ++number;
    const size_t end = text.find('\n');
    const std::string_view line = trimmedBlanks(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    const std::string_view name = eq == std::string_view::npos ? line : trimmedBlanks(line.substr(0, eq));
    if (eq == std::string_view::npos || !isVariableName(name)) {
      file.malformed.push_back({number, std::string(line)});
      continue;
    }
    file.entries.push_back({std::string(name), std::string(trimmedBlanks(line.substr(eq + 1))), number});
  }
  return file;
}

Status readConfFile(const std::string& path, ConfFile* out, bool* exists) {
  *exists = false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      *out = ConfFile{path, {}, {}};
      return Status::Ok();
    }
    return invalidArgument("cannot read {}: {}", path, std::strerror(errno));
  }
  *exists = true;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return invalidArgument("cannot read {}: it is a directory", path);
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      text.append(buffer, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const int error = errno;
      ::close(fd);
      return invalidArgument("cannot read {}: {}", path, std::strerror(error));
    }
  }
  ::close(fd);
  *out = parseConfText(path, text);
  return Status::Ok();
}

}  // namespace loom
