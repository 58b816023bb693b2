; MatMul, BatchMatMul and Softmax. Domain: both sides legal, plus the
; conditions stated; Replicate is only introduced on unreplicated operands
; (its copies go after existing slots, see linear.smt2).

; MatMul is Linear without bias or activation: same semantics, same parallel
; forms, so it inherits every Linear axiom.
(assert (! (forall ((x Tensor) (w Tensor)) (= (matmul x w) (linear x w 0))) :named matmul_is_linear))
; Unsplit operands with equal slots (none, or as many of their own): every
; task is one slot's product, so copying commutes with it. Split operands
; are left to the forms above: their tasks' slots are not ordered as
; Replicate orders its copies.
(assert (! (forall ((x Tensor) (w Tensor) (k Int))
  (=> (and (= (deg_after x (- 1)) 1) (= (deg_after w (- 1)) 1) (= (rep w) (rep x)) (= (rep (matmul x w)) (rep x)))
      (= (replicate (matmul x w) k) (matmul (replicate x k) (replicate w k))))) :named matmul_replicate_slotwise))
; Products of three associate when two neighbours are unsplit with equal
; slots: the third's tasks meet the same slot of both on either side. (With
; every operand split both ways, `pcgx axioms check` finds a guard-free
; associativity wrong: partial sums land in other slots.)
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor))
  (=> (and (= (deg_after y (- 1)) 1) (= (deg_after z (- 1)) 1) (= (rep z) (rep y)))
      (= (matmul (matmul x y) z) (matmul x (matmul y z))))) :named matmul_associative_unsplit_right))
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor))
  (=> (and (= (deg_after x (- 1)) 1) (= (deg_after y (- 1)) 1) (= (rep y) (rep x)))
      (= (matmul (matmul x y) z) (matmul x (matmul y z))))) :named matmul_associative_unsplit_left))
; And through a reduction-parallel product: the contraction split k ways
; and nothing else, the third operand unsplit with k slots (or the first,
; the other two splitting the second product's contraction). Partial sum s
; meets slot s on both sides.
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor))
  (=> (and (= (rep x) 1) (= (rep y) 1) (= (deg_after x (- 1)) (deg x (- (rank x) 1))) (= (deg_after y (- 1)) (deg y (- (rank y) 2)))
           (= (deg y (- (rank y) 2)) (deg x (- (rank x) 1))) (= (deg_after z (- 1)) 1) (= (rep z) (deg x (- (rank x) 1))))
      (= (matmul (matmul x y) z) (matmul x (matmul y z))))) :named matmul_associative_reduction_right))
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor))
  (=> (and (= (rep y) 1) (= (rep z) 1) (= (deg_after y (- 1)) (deg y (- (rank y) 1))) (= (deg_after z (- 1)) (deg z (- (rank z) 2)))
           (= (deg z (- (rank z) 2)) (deg y (- (rank y) 1))) (= (deg_after x (- 1)) 1) (= (rep x) (deg y (- (rank y) 1))))
      (= (matmul (matmul x y) z) (matmul x (matmul y z))))) :named matmul_associative_reduction_left))

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
; Copies and products of three, as for MatMul above; and copies of
; unreplicated operands, as for Linear (linear_replicate).
(assert (! (forall ((x Tensor) (y Tensor) (k Int))
  (=> (and (= (rep x) 1) (= (rep y) 1) (= (rep (batch_matmul x y)) 1))
      (= (replicate (batch_matmul x y) k) (batch_matmul (replicate x k) (replicate y k))))) :named bmm_replicate))
(assert (! (forall ((x Tensor) (y Tensor) (k Int))
  (=> (and (= (deg_after x (- 1)) 1) (= (deg_after y (- 1)) 1) (= (rep y) (rep x)) (= (rep (batch_matmul x y)) (rep x)))
      (= (replicate (batch_matmul x y) k) (batch_matmul (replicate x k) (replicate y k))))) :named bmm_replicate_slotwise))
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor))
  (=> (and (= (deg_after y (- 1)) 1) (= (deg_after z (- 1)) 1) (= (rep z) (rep y)))
      (= (batch_matmul (batch_matmul x y) z) (batch_matmul x (batch_matmul y z))))) :named bmm_associative_unsplit_right))
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor))
  (=> (and (= (deg_after x (- 1)) 1) (= (deg_after y (- 1)) 1) (= (rep y) (rep x)))
      (= (batch_matmul (batch_matmul x y) z) (batch_matmul x (batch_matmul y z))))) :named bmm_associative_unsplit_left))
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor))
  (=> (and (= (rep x) 1) (= (rep y) 1) (= (deg_after x (- 1)) (deg x (- (rank x) 1))) (= (deg_after y (- 1)) (deg y (- (rank y) 2)))
           (= (deg y (- (rank y) 2)) (deg x (- (rank x) 1))) (= (deg_after z (- 1)) 1) (= (rep z) (deg x (- (rank x) 1))))
      (= (batch_matmul (batch_matmul x y) z) (batch_matmul x (batch_matmul y z))))) :named bmm_associative_reduction_right))
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor))
  (=> (and (= (rep y) 1) (= (rep z) 1) (= (deg_after y (- 1)) (deg y (- (rank y) 1))) (= (deg_after z (- 1)) (deg z (- (rank z) 2)))
           (= (deg z (- (rank z) 2)) (deg y (- (rank y) 1))) (= (deg_after x (- 1)) 1) (= (rep x) (deg y (- (rank y) 1))))
      (= (batch_matmul (batch_matmul x y) z) (batch_matmul x (batch_matmul y z))))) :named bmm_associative_reduction_left))
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
; Causal softmax (key j masked after query i, the last two axes): a shard
; knows where its query rows start, so splits, merges and copies of any
; dimension but the normalized one commute with it, the query rows
; included. Concatenation does not: the second part's rows would be masked
; as if they came first.
(assert (! (forall ((x Tensor) (a Int) (d Int) (k Int))
  (=> (and (<= 0 a) (distinct a d)) (= (softmax_causal (repartition x d k) a) (repartition (softmax_causal x a) d k)))) :named softmax_causal_repartition))
(assert (! (forall ((x Tensor) (a Int) (d Int) (k Int))
  (=> (and (<= 0 a) (distinct a d)) (= (softmax_causal (combine x d k) a) (combine (softmax_causal x a) d k)))) :named softmax_causal_combine))
(assert (! (forall ((x Tensor) (a Int) (k Int)) (= (softmax_causal (replicate x k) a) (replicate (softmax_causal x a) k))) :named softmax_causal_replicate))
