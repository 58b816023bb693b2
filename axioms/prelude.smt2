; pcgx operator axioms: declarations shared by every axiom file.
;
; Tensors are an uninterpreted sort. An operator is a function whose tensor
; arguments come first and whose attributes follow as integers. Operators
; are NOT declared here: each one's symbols are declared from its registry
; entry (OpDef::smt, pcg/src/ops/), which also states each attribute's code;
; `pcgx ops check NAME` prints the declaration. The shape
; functions below appear only in preconditions: when an axiom is
; instantiated, pcgx evaluates them from its own shape and degree inference,
; and an instance whose precondition is false, or one of whose sides is not a
; legal PCG, or whose sides differ in parallel shape, is never asserted.
(declare-sort Tensor 0)
(declare-fun rep (Tensor) Int)          ; replica degree
(declare-fun deg (Tensor Int) Int)      ; degree of a dimension
(declare-fun rank (Tensor) Int)         ; number of dimensions
(declare-fun extent (Tensor Int) Int)   ; size of a dimension; axis -1: the replica degree
(declare-fun deg_after (Tensor Int) Int) ; product of the degrees of the dimensions after d (d = -1: of all)

; Permutation helpers, evaluated by pcgx like the shape functions:
(declare-fun perm_at (Int Int) Int)       ; p[d]: the input dimension behind output dimension d
(declare-fun perm_pos (Int Int) Int)      ; the d with p[d] = a (-1 stays -1, the replica axis)
(declare-fun perm_compose (Int Int) Int)  ; the permutation of transposing by p, then by q
(declare-fun perm_is_identity (Int) Int)  ; 1 when p leaves every dimension in place, else 0
; Reshape helpers, evaluated by pcgx:
(declare-fun shape_at (Int Int) Int)               ; size i of a shape code
(declare-fun reshape_keeps (Tensor Int Int) Int)   ; 1 when reshaping x to the shape keeps dimensions 0..d-1 (so d can be split)
