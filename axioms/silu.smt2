; Silu (SiLU, swish: x * sigmoid(x)): elementwise, so computed block by
; block and slot by slot; and, by definition, the product of x and its
; sigmoid. Domain: any tensors on which both sides are legal.

(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (silu (repartition x d k)) (repartition (silu x) d k))) :named silu_repartition))
(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (silu (combine x d k)) (combine (silu x) d k))) :named silu_combine))
(assert (! (forall ((x Tensor) (k Int)) (= (silu (replicate x k)) (replicate (silu x) k))) :named silu_replicate))
(assert (! (forall ((x Tensor) (y Tensor) (a Int)) (= (silu (concat x y a)) (concat (silu x) (silu y) a))) :named silu_concat))
(assert (! (forall ((x Tensor) (a Int)) (= (silu (split0 x a)) (split0 (silu x) a))) :named silu_split0))
(assert (! (forall ((x Tensor) (a Int)) (= (silu (split1 x a)) (split1 (silu x) a))) :named silu_split1))
(assert (! (forall ((x Tensor) (p Int)) (= (silu (transpose x p)) (transpose (silu x) p))) :named silu_transpose))
(assert (! (forall ((x Tensor)) (= (silu x) (ew_mul x (sigmoid x)))) :named silu_is_x_times_sigmoid))
