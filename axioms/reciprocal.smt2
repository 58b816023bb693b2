; Reciprocal (1 / x): elementwise, so computed block by block and slot by
; slot; an involution, and the reciprocal of a product is the product of
; the reciprocals. It does not commute with Reduce (a sum). Domain: any
; tensors on which both sides are legal.

(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (reciprocal (repartition x d k)) (repartition (reciprocal x) d k))) :named reciprocal_repartition))
(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (reciprocal (combine x d k)) (combine (reciprocal x) d k))) :named reciprocal_combine))
(assert (! (forall ((x Tensor) (k Int)) (= (reciprocal (replicate x k)) (replicate (reciprocal x) k))) :named reciprocal_replicate))
(assert (! (forall ((x Tensor) (y Tensor) (a Int)) (= (reciprocal (concat x y a)) (concat (reciprocal x) (reciprocal y) a))) :named reciprocal_concat))
(assert (! (forall ((x Tensor) (a Int)) (= (reciprocal (split0 x a)) (split0 (reciprocal x) a))) :named reciprocal_split0))
(assert (! (forall ((x Tensor) (a Int)) (= (reciprocal (split1 x a)) (split1 (reciprocal x) a))) :named reciprocal_split1))
(assert (! (forall ((x Tensor) (p Int)) (= (reciprocal (transpose x p)) (transpose (reciprocal x) p))) :named reciprocal_transpose))
(assert (! (forall ((x Tensor)) (= (reciprocal (reciprocal x)) x)) :named reciprocal_involution))
(assert (! (forall ((x Tensor) (y Tensor)) (= (reciprocal (ew_mul x y)) (ew_mul (reciprocal x) (reciprocal y)))) :named reciprocal_of_a_product))
