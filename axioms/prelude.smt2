; pcgx operator axioms: declarations shared by every axiom file.
;
; Tensors are an uninterpreted sort. An operator is a function whose tensor
; arguments come first and whose attributes follow as integers (see
; verifier/include/pcgx/verifier/encoding.h for the table). The shape
; functions below appear only in preconditions: when an axiom is
; instantiated, pcgx evaluates them from its own shape and degree inference,
; and an instance whose precondition is false, or one of whose sides is not a
; legal PCG, or whose sides differ in parallel shape, is never asserted.
(declare-sort Tensor 0)
(declare-fun rep (Tensor) Int)          ; replica degree
(declare-fun deg (Tensor Int) Int)      ; degree of a dimension
(declare-fun rank (Tensor) Int)         ; number of dimensions
(declare-fun extent (Tensor Int) Int)   ; size of a dimension; axis -1: the replica degree

(declare-fun repartition (Tensor Int Int) Tensor)  ; x, dim, degree
(declare-fun combine (Tensor Int Int) Tensor)      ; x, dim, degree
(declare-fun replicate (Tensor Int) Tensor)        ; x, degree
(declare-fun reduce (Tensor Int) Tensor)           ; x, degree
(declare-fun relu (Tensor) Tensor)
(declare-fun ew_add (Tensor Tensor) Tensor)
(declare-fun ew_mul (Tensor Tensor) Tensor)
(declare-fun linear (Tensor Tensor Int) Tensor)    ; x, W, activation (0 none, 1 relu)
(declare-fun concat (Tensor Tensor Int) Tensor)    ; x, y, axis (-1: the replica axis)
(declare-fun split0 (Tensor Int) Tensor)           ; first half along an axis
(declare-fun split1 (Tensor Int) Tensor)           ; second half
(declare-fun matmul (Tensor Tensor) Tensor)        ; A[..., m, k], B[k, n]
(declare-fun batch_matmul (Tensor Tensor) Tensor)  ; A[b..., m, k], B[b..., k, n]
(declare-fun softmax (Tensor Int) Tensor)          ; x, axis (from the front), not causal
(declare-fun scalar_mul (Tensor Int Int) Tensor)   ; x, the scalar as numerator and denominator
(declare-fun transpose (Tensor Int) Tensor)        ; x, perm as 1 followed by its digits ([2,0,1] is 1201)
; Permutation helpers, evaluated by pcgx like the shape functions:
(declare-fun perm_at (Int Int) Int)       ; p[d]: the input dimension behind output dimension d
(declare-fun perm_pos (Int Int) Int)      ; the d with p[d] = a (-1 stays -1, the replica axis)
(declare-fun perm_compose (Int Int) Int)  ; the permutation of transposing by p, then by q
(declare-fun perm_is_identity (Int) Int)  ; 1 when p leaves every dimension in place, else 0
