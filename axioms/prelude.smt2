; pcgx operator axioms: declarations shared by every axiom file.
;
; Tensors are an uninterpreted sort. An operator is a function whose tensor
; arguments come first and whose attributes follow as integers (see
; verifier/src/encoding.h for the table and the attribute codes). The shape
; functions below appear only in preconditions: when an axiom is
; instantiated, pcgx evaluates them from its own shape and degree inference,
; and an instance whose precondition is false, or one of whose sides is not a
; legal PCG, or whose sides differ in parallel shape, is never asserted.
(declare-sort Tensor 0)
(declare-fun rep (Tensor) Int)          ; replica degree
(declare-fun deg (Tensor Int) Int)      ; degree of a dimension
(declare-fun rank (Tensor) Int)         ; number of dimensions
(declare-fun extent (Tensor Int) Int)   ; size of a dimension; axis -1: the replica degree
(declare-fun deg_after (Tensor Int) Int) ; product of the degrees of the dimensions after d

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
(declare-fun all_reduce (Tensor Int) Tensor)        ; x, degree
(declare-fun gelu (Tensor) Tensor)
(declare-fun sigmoid (Tensor) Tensor)
(declare-fun tanh (Tensor) Tensor)
(declare-fun dropout (Tensor Int Int) Tensor)        ; x, rate (IEEE-754 bits), seed
(declare-fun reshape (Tensor Int) Tensor)            ; x, shape as 1 then 4 digits per size ([16,4] is 100160004)
(declare-fun layer_norm (Tensor Int) Tensor)         ; x, eps (bits); no affine parameters
(declare-fun layer_norm_affine (Tensor Tensor Tensor Int) Tensor)  ; x, gamma, beta, eps (bits)
(declare-fun batch_norm (Tensor Tensor Tensor Int Int) Tensor)     ; x, gamma, beta, eps (bits), group (0: the batch)
(declare-fun batch_sum (Tensor) Tensor)                            ; x: sum per channel
(declare-fun batch_squares (Tensor Tensor) Tensor)                 ; x, sum: sum of (x - sum/n)^2 per channel
(declare-fun batch_norm_apply (Tensor Tensor Tensor Tensor Tensor Int) Tensor)  ; x, sum, squares, gamma, beta, eps (bits)
(declare-fun embedding (Tensor Tensor) Tensor)       ; indices, table[rows, columns]
(declare-fun embedding_bag (Tensor Tensor) Tensor)   ; indices[batch, bag], table
; x[N,C,H,W], w[O,C/groups,kh,kw], stride_h, stride_w, pad_h, pad_w, groups, activation; no bias
(declare-fun conv2d (Tensor Tensor Int Int Int Int Int Int) Tensor)
; x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, mode (0 max, 1 avg)
(declare-fun pool2d (Tensor Int Int Int Int Int Int Int) Tensor)
(declare-fun softmax_cross_entropy (Tensor Tensor) Tensor)  ; logits, labels
(declare-fun mse_loss (Tensor Tensor) Tensor)               ; prediction, target
; Reshape helpers, evaluated by pcgx:
(declare-fun shape_at (Int Int) Int)               ; size i of a shape code
(declare-fun reshape_keeps (Tensor Int Int) Int)   ; 1 when reshaping x to the shape keeps dimensions 0..d-1 (so d can be split)
