// loom-info's text view of the facts (facts.h): one section per part, aligned "key: value" lines.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace loom::info_tool {

std::string renderFacts(const nlohmann::ordered_json& facts);
// --settings: the settings (settingsFacts), then the settings files looked for (settingsFilesFacts).
std::string renderSettings(const nlohmann::ordered_json& settings, const nlohmann::ordered_json& files);

}  // namespace loom::info_tool
