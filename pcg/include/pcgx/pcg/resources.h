#pragma once
// Where pcgx finds the files it ships: the axioms, the rulesets with their
// MANIFEST.json and the opsets, and the data (machines, cost tables).
//
// An installed pcgx (`cmake --install`) finds them under
// <prefix>/share/pcgx/, beside the bin/ it runs from; a build tree finds
// the source tree's (the path is compiled in). $PCGX_SHARE_DIR names that
// directory instead (a program of one's own linking the installed
// libraries sets it to the package's pcgx_SHARE_DIR); $PCGX_AXIOMS and
// $PCGX_DATA_DIR override the axioms and the data alone.
//
// Plugins add axiom and opset directories of their own (plugin.h); the
// search paths that hold them come shipped first, then plugins in the
// order loaded.
#include <string>
#include <vector>

namespace pcgx {

enum class Shipped {
  kAxioms,    // axioms/: prelude.smt2 and one .smt2 file per operator family
  kRulesets,  // rulesets/: the shipped rulesets and MANIFEST.json
  kOpsets,    // rulesets/opsets/: the named operator sets
  kData,      // data/: machines/, cost/, plans/, schedules/
};

// The directory pcgx ships `what` in.
std::string shipped_dir(Shipped what);
// Whether the shipped files are an installed pcgx's (share/pcgx), not a
// source tree's.
bool installed();

// The directory of the running executable, when it can be read.
std::string executable_dir();

// `what`'s search path: the shipped directory, then each loaded plugin's
// (plugin.h). Only kAxioms and kOpsets have plugin directories. Throws
// pcgx::Error naming the file where a plugin's file has the name of one
// before it: plugins add files, never replace them.
std::vector<std::string> search_path(Shipped what);

}  // namespace pcgx
