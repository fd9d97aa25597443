#pragma once
// "Did you mean": the valid name nearest to a misspelt one, for errors about unknown keys and
// names (plan keys, measurement modes and ops). One definition for every reader.
#include <string>
#include <vector>

namespace peerplan {

// Edit distance (insertions, deletions, substitutions; ASCII case-insensitive).
size_t edit_distance(const std::string& a, const std::string& b);

// The entry of `valid` nearest to `got`, or "" when none is close (more than a third of the
// longer name would have to change).
std::string nearest_name(const std::string& got, const std::vector<std::string>& valid);

// "one of a, b, c (did you mean \"b\"?)": the phrase errors use after "expected".
std::string one_of_with_suggestion(const std::string& got, const std::vector<std::string>& valid);

}  // namespace peerplan
