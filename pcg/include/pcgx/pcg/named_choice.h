#pragma once
// Reading a choice (an enum of the recipe: precision, recomputation, ZeRO
// stage, optimizer, pipeline schedule) from its name, as files and flags
// write it: the one of `choices` whose name() is `text`.
#include <cstddef>
#include <optional>
#include <string_view>

namespace pcgx {

template <class E, std::size_t N>
std::optional<E> choice_named(std::string_view text, const E (&choices)[N]) {
  for (const E c : choices)
    if (text == name(c)) return c;
  return std::nullopt;
}

}  // namespace pcgx
