; Transpose moves dimensions, not values: it commutes with what works element
; by element or slot by slot, renames the dimension a split or merge acts on,
; and composes.

(assert (! (forall ((x Tensor) (p Int) (q Int))
  (= (transpose (transpose x p) q) (transpose x (perm_compose p q)))) :named transpose_compose))
(assert (! (forall ((x Tensor) (p Int)) (=> (= (perm_is_identity p) 1) (= (transpose x p) x))) :named transpose_identity))
(assert (! (forall ((x Tensor) (p Int)) (= (relu (transpose x p)) (transpose (relu x) p))) :named relu_transpose))
(assert (! (forall ((x Tensor) (y Tensor) (p Int)) (= (ew_add (transpose x p) (transpose y p)) (transpose (ew_add x y) p))) :named ew_add_transpose))
(assert (! (forall ((x Tensor) (y Tensor) (p Int)) (= (ew_mul (transpose x p) (transpose y p)) (transpose (ew_mul x y) p))) :named ew_mul_transpose))
(assert (! (forall ((x Tensor) (p Int) (n Int) (m Int)) (= (scalar_mul (transpose x p) n m) (transpose (scalar_mul x n m) p))) :named scalar_mul_transpose))
(assert (! (forall ((x Tensor) (p Int) (k Int)) (= (replicate (transpose x p) k) (transpose (replicate x k) p))) :named replicate_transpose))
(assert (! (forall ((x Tensor) (p Int) (k Int)) (= (reduce (transpose x p) k) (transpose (reduce x k) p))) :named reduce_transpose))
(assert (! (forall ((x Tensor) (p Int) (d Int) (k Int))
  (= (repartition (transpose x p) d k) (transpose (repartition x (perm_at p d) k) p))) :named repartition_transpose))
(assert (! (forall ((x Tensor) (p Int) (d Int) (k Int))
  (= (combine (transpose x p) d k) (transpose (combine x (perm_at p d) k) p))) :named combine_transpose))
(assert (! (forall ((x Tensor) (y Tensor) (p Int) (a Int))
  (= (transpose (concat x y a) p) (concat (transpose x p) (transpose y p) (perm_pos p a)))) :named transpose_concat))
(assert (! (forall ((x Tensor) (p Int) (a Int))
  (=> (<= 0 a) (= (softmax (transpose x p) a) (transpose (softmax x (perm_at p a)) p)))) :named softmax_transpose))
