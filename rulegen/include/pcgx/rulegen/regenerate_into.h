#pragma once
// `pcgx regenerate` as one library call: an opset's candidates proved
// (regenerate.h) into a directory of rulesets, as the shipped rulesets/
// is laid out: <opset>-v<N>.json, its unproved list <opset>-v<N>.unproved.txt,
// and its entry in MANIFEST.json (whose content hashes a build pins as
// trusted), each written atomically.
#include <string>
#include <vector>

#include "pcgx/rulegen/regenerate.h"

namespace pcgx::rulegen {

struct RegenerateRequest {
  RegenerateOptions options;            // what to generate and prove (its `previous` is set from `reuse`)
  std::vector<std::string> axiom_dirs;  // searched after the shipped axioms and the plugins' (verify::axiom_search_path)
  std::string out_dir;                  // an existing directory
  int version = 1;                      // the N of <opset>-v<N>.json
  // Whose proofs to reuse (RegenerateOptions::previous): the ruleset being
  // replaced where it exists, the file named, or none.
  enum class Reuse : uint8_t { kReplaced, kFile, kNone };
  Reuse reuse = Reuse::kReplaced;
  std::string reuse_file;  // with kFile
  std::string command;     // the command line the manifest records
};

struct RegenerateReport {
  Regenerated result;        // result.proved.ruleset is what was written
  std::string path;          // the ruleset written
  std::string manifest;      // MANIFEST.json
  std::string content_hash;  // of the file written
  std::string reused_from;   // the ruleset whose proofs were offered; empty for none
};

// Throws pcgx::Error naming the field (RegenerateRequest.out_dir, .version)
// or the file (a ruleset to reuse that cannot be read), writing nothing;
// and whatever regenerate() throws.
RegenerateReport regenerate_into(RegenerateRequest request);

}  // namespace pcgx::rulegen
