#include "model/named_values.h"

#include <cstdlib>

namespace loom::model {

std::vector<NamedValue> splitNamedValues(const std::string& text) {
  std::vector<NamedValue> entries;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find_first_of(", ", at);
    const std::string entry = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? text.size() : end + 1;
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) entries.push_back({entry, "", false});
    else entries.push_back({entry.substr(0, eq), entry.substr(eq + 1), true});
  }
  return entries;
}

bool parseNumber(const std::string& text, double* out) {
  char* rest = nullptr;
  *out = std::strtod(text.c_str(), &rest);
  return !text.empty() && rest != nullptr && *rest == '\0';
}

}  // namespace loom::model
