#pragma once
// Graph splitting (internal; see unity_search.h): cutting a model into
// sequential pieces at tensors every later operator reaches only through
// them, a piece as a graph of its own, and joining the pieces' optimized
// graphs back into one PCG. Also the stage boundaries of pipeline.h.
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/graph_cuts.h"
#include "pcgx/search/rule_library.h"

namespace pcgx::search {

inline bool is_source(const Node& n) { return n.op->op_class == OpClass::kSource; }

// The non-source nodes of g in graph order.
std::vector<NodeId> compute_order(const Graph& g);

struct Piece {
  std::vector<NodeId> nodes;  // non-source nodes of the model
  TensorRef in{-1, 0};        // boundary tensor read (none for the first)
  TensorRef out{-1, 0};       // boundary tensor produced (none for the last)
};

// Pieces of at least k operators, cut where the fewest rule matches of
// `rules` are blocked; one piece when the graph has fewer than 2k.
std::vector<Piece> split(const Graph& g, const RuleLibrary& rules, int64_t k);
// The pieces of `order` cut after the given positions of valid_cuts().
std::vector<Piece> pieces_at(const std::vector<NodeId>& order, const std::vector<std::pair<size_t, TensorRef>>& cuts);

// How a boundary tensor is split between pieces: its samples (dimension
// 0), its second dimension (a transformer's sequence, which sequence
// parallelism keeps split between layers), and its last dimension.
// Splitting the second (or, where it does not divide, the last) is
// Megatron-LM's scatter-gather of a pipeline stage boundary (Narayanan et
// al. 2021, Section 4.1): each of the devices that would each receive the
// same samples whole receives 1/r of them, and the stage gathers them on
// its own links.
struct BoundaryLayout {
  int64_t samples = 1, second = 1, last = 1;
  int64_t degree() const { return samples * second * last; }
};

// A piece as a graph of its own, with nodes renamed canonically (sources
// s0, s1, ..., others c2, c3, ...) and random seeds (Dropout's `seed`)
// numbered canonically, so identical layers give identical graphs; `names`
// and `seeds` map back. Its boundary input is an Input named "piece:in"
// split as `in` says (then combined), and its boundary output is
// repartitioned as `out` says. A pipelined boundary's input is pipelined
// alike, right after the Input.
struct PieceGraph {
  Graph graph;
  std::map<std::string, std::string> names;  // canonical -> model name
  std::map<int64_t, int64_t> seeds;          // canonical -> model seed
};
PieceGraph piece_graph(const Graph& g, const Piece& p, BoundaryLayout in, BoundaryLayout out);
// `pg` with its operators (and with `sources`, its sources) named as in
// the model, `names` mapping each name to itself (joining keeps them),
// seeds as they were: where the search must see the model's names (a
// written plan selects by them, recompute operators names what it
// recomputes). Without `sources` the sources keep their canonical names
// (a piece of a pipeline stage reads the stage's boundary input, whose
// name would read as a piece's).
PieceGraph with_model_names(const PieceGraph& pg, bool sources = true);

// A piece's operator's real name: its canonical name's, or, for a part an
// operator was expanded into within the piece (the vocabulary-parallel
// loss's "c12.lse") or one a rule made and named after it ("c6.linear",
// apply_match.cpp), the real name of what it is a part of with the same
// suffix ("loss.lse"), the longest such prefix; "" when there is none.
std::string real_name(const std::map<std::string, std::string>& names, const std::string& canonical);

// One piece's optimized graph and the names it maps back with.
struct JoinPart {
  const Graph* graph;
  const PieceGraph* piece;
};
// Joins pieces in order: each piece's "piece:in" input takes the previous
// piece's (only) output, its sample dimension combined or repartitioned to
// the degree the piece expects; sources are shared by model name; the last
// piece's outputs are the graph's. A Pipeline whose input already has its
// output's layout (the carried tensor was pipelined upstream) is dropped.
// `origin` (optional) receives, per joined node, the part and the node of
// that part's graph it came from (a layout change inserted before a piece
// input counts as that input).
struct JoinOrigin {
  int part = 0;
  NodeId node = -1;
};
Graph join_pieces(const std::string& name, std::span<const JoinPart> parts, std::vector<JoinOrigin>* origin = nullptr);

}  // namespace pcgx::search
