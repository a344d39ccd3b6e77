// The model's inputs by name ("intra_gbs=240,nic_gbs=25", "join_us=40 record_us=0.3"): one syntax for
// the machine's fields (machine_fields.h) and the bootstrap's constants (bootstrap_model.h), split
// here; each caller checks the names and values it knows.
#pragma once

#include <string>
#include <vector>

namespace loom::model {

struct NamedValue {
  std::string name;   // the entry before '=' (the whole entry when it has none)
  std::string value;  // after '='
  bool hasValue = false;  // the entry has a '='
};

// The entries of `text`, separated by commas or spaces, in order; empty entries are skipped.
std::vector<NamedValue> splitNamedValues(const std::string& text);

// `text` as a number: false when it is empty or has anything after the number.
bool parseNumber(const std::string& text, double* out);

}  // namespace loom::model
