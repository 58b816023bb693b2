; Softplus (log(1 + exp(x)), examples/softplus-plugin): elementwise, so
; computed block by block and slot by slot. Not linear: it commutes with
; no Reduce of partial sums, and no axiom says so. Domain: any tensors on
; which both sides are legal.

(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (softplus (repartition x d k)) (repartition (softplus x) d k))) :named softplus_repartition))
(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (softplus (combine x d k)) (combine (softplus x) d k))) :named softplus_combine))
(assert (! (forall ((x Tensor) (k Int)) (= (softplus (replicate x k)) (replicate (softplus x) k))) :named softplus_replicate))
(assert (! (forall ((x Tensor) (y Tensor) (a Int)) (= (softplus (concat x y a)) (concat (softplus x) (softplus y) a))) :named softplus_concat))
(assert (! (forall ((x Tensor) (a Int)) (= (softplus (split0 x a)) (split0 (softplus x) a))) :named softplus_split0))
(assert (! (forall ((x Tensor) (a Int)) (= (softplus (split1 x a)) (split1 (softplus x) a))) :named softplus_split1))
(assert (! (forall ((x Tensor) (p Int)) (= (softplus (transpose x p)) (transpose (softplus x) p))) :named softplus_transpose))
