#pragma once
// JSON form of a PCG ("pcgx.graph", format_version 1):
//
//   { "format_version": 1, "kind": "pcgx.graph", "name": "mlp",
//     "nodes": [ { "id": 0, "op": "Input", "name": "x",
//                  "attrs": { "shape": [64, 784] }, "inputs": [] },
//                { "id": 2, "op": "Linear", "attrs": {...}, "inputs": [[0, 0], [1, 0]] } ],
//     "outputs": [[2, 0]] }
//
// An input is [node id, output index] (or just a node id for output 0).
// Node ids need only be unique; nodes may appear in any order, and cycles are
// reported. Shapes are not stored: they are re-inferred and validated on load.
// Errors read "FILE: FIELD: reason", e.g. "m.json: nodes[3].attrs.dim: ...".
#include <string>
#include <utility>
#include <vector>

#include "pcgx/pcg/graph.h"

namespace pcgx {

inline constexpr int kGraphFormatVersion = 1;

std::string graph_to_json(const Graph& g, int indent = 1);
// `source` names the text in error messages (a file path, "<string>").
Graph graph_from_json(const std::string& text, const std::string& source);

Graph load_graph(const std::string& path);
void save_graph(const Graph& g, const std::string& path);  // atomic

// Reads a whole file; throws FileError when it cannot be read.
std::string read_text_file(const std::string& path);
// Writes a file atomically (temporary file, then rename), so a failed
// command leaves no partial file. "-" is standard output. Refuses to
// replace anything but a regular file (a directory, device, pipe or
// symbolic link at `path` is an error naming it).
void write_text_file_atomic(const std::string& path, const std::string& text);
// Several files, all or none: each is written to a temporary file first,
// and only when every one is written are they renamed into place (a bad
// --plot path no longer leaves the run report behind). Paths as above.
void write_text_files_atomic(const std::vector<std::pair<std::string, std::string>>& files);
// Throws the FileError writing `path` would (not a regular file, no such
// directory, no permission) without writing: for outputs of long work,
// checked before the work starts.
void check_output_path(const std::string& path);

}  // namespace pcgx
