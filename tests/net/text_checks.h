// Checks on what a message or a dump says, shared by the network tests.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace loom::net {

// Every word appears in text (each missing one is a failure naming it).
inline void expectWords(const std::string& text, std::initializer_list<const char*> words) {
  for (const char* w : words) EXPECT_NE(text.find(w), std::string::npos) << w << " missing in: " << text;
}

}  // namespace loom::net
