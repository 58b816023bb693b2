; ScalarMul: x times a constant num/den. Linear in x, so it commutes with
; every parallel operator and distributes over sums and products.

(assert (! (forall ((x Tensor)) (= (scalar_mul x 2 1) (ew_add x x))) :named scalar_mul_two))
(assert (! (forall ((x Tensor) (p Int) (q Int) (d Int) (k Int)) (= (repartition (scalar_mul x p q) d k) (scalar_mul (repartition x d k) p q))) :named scalar_mul_repartition))
(assert (! (forall ((x Tensor) (p Int) (q Int) (d Int) (k Int)) (= (combine (scalar_mul x p q) d k) (scalar_mul (combine x d k) p q))) :named scalar_mul_combine))
(assert (! (forall ((x Tensor) (p Int) (q Int) (k Int)) (= (replicate (scalar_mul x p q) k) (scalar_mul (replicate x k) p q))) :named scalar_mul_replicate))
(assert (! (forall ((x Tensor) (p Int) (q Int) (k Int)) (= (reduce (scalar_mul x p q) k) (scalar_mul (reduce x k) p q))) :named scalar_mul_reduce))
(assert (! (forall ((x Tensor) (y Tensor) (p Int) (q Int)) (= (scalar_mul (ew_add x y) p q) (ew_add (scalar_mul x p q) (scalar_mul y p q)))) :named scalar_mul_ew_add))
(assert (! (forall ((x Tensor) (y Tensor) (p Int) (q Int)) (= (ew_mul (scalar_mul x p q) y) (scalar_mul (ew_mul x y) p q))) :named scalar_mul_ew_mul))
(assert (! (forall ((x Tensor) (y Tensor) (p Int) (q Int) (a Int)) (= (scalar_mul (concat x y a) p q) (concat (scalar_mul x p q) (scalar_mul y p q) a))) :named scalar_mul_concat))
(assert (! (forall ((x Tensor) (w Tensor) (p Int) (q Int)) (= (linear (scalar_mul x p q) w 0) (scalar_mul (linear x w 0) p q))) :named scalar_mul_linear))
(assert (! (forall ((x Tensor) (w Tensor) (p Int) (q Int)) (= (linear x (scalar_mul w p q) 0) (scalar_mul (linear x w 0) p q))) :named scalar_mul_linear_weight))
(assert (! (forall ((x Tensor) (y Tensor) (p Int) (q Int)) (= (batch_matmul (scalar_mul x p q) y) (scalar_mul (batch_matmul x y) p q))) :named scalar_mul_bmm_left))
(assert (! (forall ((x Tensor) (y Tensor) (p Int) (q Int)) (= (batch_matmul x (scalar_mul y p q)) (scalar_mul (batch_matmul x y) p q))) :named scalar_mul_bmm_right))
