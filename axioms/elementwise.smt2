; Elementwise operators: algebra, and commutation with the parallel operators.
; Domain: any tensors on which both sides are legal.

(assert (! (forall ((x Tensor) (y Tensor)) (= (ew_add x y) (ew_add y x))) :named ew_add_commutative))
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor)) (= (ew_add (ew_add x y) z) (ew_add x (ew_add y z)))) :named ew_add_associative))
(assert (! (forall ((x Tensor) (y Tensor)) (= (ew_mul x y) (ew_mul y x))) :named ew_mul_commutative))
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor)) (= (ew_mul (ew_mul x y) z) (ew_mul x (ew_mul y z)))) :named ew_mul_associative))
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor)) (= (ew_mul x (ew_add y z)) (ew_add (ew_mul x y) (ew_mul x z)))) :named ew_mul_distributes))

; Relu, EwAdd and EwMul are computed block by block and slot by slot.
(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (relu (repartition x d k)) (repartition (relu x) d k))) :named relu_repartition))
(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (relu (combine x d k)) (combine (relu x) d k))) :named relu_combine))
(assert (! (forall ((x Tensor) (k Int)) (= (relu (replicate x k)) (replicate (relu x) k))) :named relu_replicate))
(assert (! (forall ((x Tensor) (y Tensor) (d Int) (k Int)) (= (repartition (ew_add x y) d k) (ew_add (repartition x d k) (repartition y d k)))) :named ew_add_repartition))
(assert (! (forall ((x Tensor) (y Tensor) (d Int) (k Int)) (= (combine (ew_add x y) d k) (ew_add (combine x d k) (combine y d k)))) :named ew_add_combine))
(assert (! (forall ((x Tensor) (y Tensor) (k Int)) (= (replicate (ew_add x y) k) (ew_add (replicate x k) (replicate y k)))) :named ew_add_replicate))
(assert (! (forall ((x Tensor) (y Tensor) (d Int) (k Int)) (= (repartition (ew_mul x y) d k) (ew_mul (repartition x d k) (repartition y d k)))) :named ew_mul_repartition))
(assert (! (forall ((x Tensor) (y Tensor) (d Int) (k Int)) (= (combine (ew_mul x y) d k) (ew_mul (combine x d k) (combine y d k)))) :named ew_mul_combine))
(assert (! (forall ((x Tensor) (y Tensor) (k Int)) (= (replicate (ew_mul x y) k) (ew_mul (replicate x k) (replicate y k)))) :named ew_mul_replicate))
; Reduce is a sum of slots: it distributes over EwAdd, and over EwMul by a replicated factor.
(assert (! (forall ((x Tensor) (y Tensor) (k Int)) (= (reduce (ew_add x y) k) (ew_add (reduce x k) (reduce y k)))) :named reduce_ew_add))
(assert (! (forall ((x Tensor) (y Tensor) (k Int)) (= (ew_mul (reduce x k) y) (reduce (ew_mul x (replicate y k)) k))) :named reduce_ew_mul))

; Relu is positively homogeneous: relu(x + x) = relu(x) + relu(x).
(assert (! (forall ((x Tensor)) (= (relu (ew_add x x)) (ew_add (relu x) (relu x)))) :named relu_double))

; Relu is idempotent (TASO's rule): relu(x) is never negative.
(assert (! (forall ((x Tensor)) (= (relu (relu x)) (relu x))) :named relu_idempotent))
