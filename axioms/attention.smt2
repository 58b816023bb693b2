; MatMul, BatchMatMul and Softmax. Domain: both sides legal, plus the
; conditions stated; Replicate is only introduced on unreplicated operands
; (its copies go after existing slots, see linear.smt2).

; MatMul is Linear without bias or activation: same semantics, same parallel
; forms, so it inherits every Linear axiom.
(assert (! (forall ((x Tensor) (w Tensor)) (= (matmul x w) (linear x w 0))) :named matmul_is_linear))

; BatchMatMul: batch dimensions split on both operands.
(assert (! (forall ((x Tensor) (y Tensor) (d Int) (k Int))
  (=> (< d (- (rank x) 2)) (= (batch_matmul (combine x d k) (combine y d k)) (combine (batch_matmul x y) d k)))) :named bmm_batch_parallel))
(assert (! (forall ((x Tensor) (y Tensor) (d Int) (k Int))
  (=> (< d (- (rank x) 2)) (= (repartition (batch_matmul x y) d k) (batch_matmul (repartition x d k) (repartition y d k))))) :named bmm_batch_parallel_split))
; Rows of A split, B replicated; columns of B split, A replicated.
(assert (! (forall ((x Tensor) (y Tensor) (k Int))
  (=> (= (rep y) 1) (= (batch_matmul (combine x (- (rank x) 2) k) y) (combine (batch_matmul x (replicate y k)) (- (rank x) 2) k)))) :named bmm_rows_parallel))
(assert (! (forall ((x Tensor) (y Tensor) (k Int))
  (=> (= (rep x) 1) (= (batch_matmul x (combine y (- (rank y) 1) k)) (combine (batch_matmul (replicate x k) y) (- (rank x) 1) k)))) :named bmm_columns_parallel))
; The contraction dimension split on both: partial sums, reduced.
(assert (! (forall ((x Tensor) (y Tensor) (k Int))
  (= (batch_matmul (combine x (- (rank x) 1) k) (combine y (- (rank y) 2) k)) (reduce (batch_matmul x y) k))) :named bmm_reduction_parallel))
; Bilinearity, and concatenation along a batch dimension.
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor)) (= (batch_matmul (ew_add x y) z) (ew_add (batch_matmul x z) (batch_matmul y z)))) :named bmm_ew_add_left))
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor)) (= (batch_matmul x (ew_add y z)) (ew_add (batch_matmul x y) (batch_matmul x z)))) :named bmm_ew_add_right))
(assert (! (forall ((x Tensor) (y Tensor) (u Tensor) (v Tensor) (d Int))
  (=> (and (<= 0 d) (< d (- (rank x) 2))) (= (batch_matmul (concat x y d) (concat u v d)) (concat (batch_matmul x u) (batch_matmul y v) d)))) :named bmm_concat_batch))

; Softmax works row by row: splits, merges and copies of other dimensions
; commute with it, and so does concatenation along another dimension. The
; axis is encoded from the front (a negative axis would mean "from the end"
; to the operator, so the conditions require 0 <= a).
(assert (! (forall ((x Tensor) (a Int) (d Int) (k Int))
  (=> (and (<= 0 a) (distinct a d)) (= (softmax (repartition x d k) a) (repartition (softmax x a) d k)))) :named softmax_repartition))
(assert (! (forall ((x Tensor) (a Int) (d Int) (k Int))
  (=> (and (<= 0 a) (distinct a d)) (= (softmax (combine x d k) a) (combine (softmax x a) d k)))) :named softmax_combine))
(assert (! (forall ((x Tensor) (a Int) (k Int)) (= (softmax (replicate x k) a) (replicate (softmax x a) k))) :named softmax_replicate))
(assert (! (forall ((x Tensor) (y Tensor) (a Int) (b Int))
  (=> (and (<= 0 a) (distinct a b)) (= (softmax (concat x y b) a) (concat (softmax x a) (softmax y a) b)))) :named softmax_concat))
