; Gelu, Sigmoid, Tanh and Dropout: elementwise, so computed block by block
; and slot by slot. Domain: any tensors on which both sides are legal.
; (Relu's axioms are in elementwise.smt2 and concat_split.smt2.)

(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (gelu (repartition x d k)) (repartition (gelu x) d k))) :named gelu_repartition))
(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (gelu (combine x d k)) (combine (gelu x) d k))) :named gelu_combine))
(assert (! (forall ((x Tensor) (k Int)) (= (gelu (replicate x k)) (replicate (gelu x) k))) :named gelu_replicate))
(assert (! (forall ((x Tensor) (y Tensor) (a Int)) (= (gelu (concat x y a)) (concat (gelu x) (gelu y) a))) :named gelu_concat))
(assert (! (forall ((x Tensor) (a Int)) (= (gelu (split0 x a)) (split0 (gelu x) a))) :named gelu_split0))
(assert (! (forall ((x Tensor) (a Int)) (= (gelu (split1 x a)) (split1 (gelu x) a))) :named gelu_split1))
(assert (! (forall ((x Tensor) (p Int)) (= (gelu (transpose x p)) (transpose (gelu x) p))) :named gelu_transpose))

(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (sigmoid (repartition x d k)) (repartition (sigmoid x) d k))) :named sigmoid_repartition))
(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (sigmoid (combine x d k)) (combine (sigmoid x) d k))) :named sigmoid_combine))
(assert (! (forall ((x Tensor) (k Int)) (= (sigmoid (replicate x k)) (replicate (sigmoid x) k))) :named sigmoid_replicate))
(assert (! (forall ((x Tensor) (y Tensor) (a Int)) (= (sigmoid (concat x y a)) (concat (sigmoid x) (sigmoid y) a))) :named sigmoid_concat))
(assert (! (forall ((x Tensor) (a Int)) (= (sigmoid (split0 x a)) (split0 (sigmoid x) a))) :named sigmoid_split0))
(assert (! (forall ((x Tensor) (a Int)) (= (sigmoid (split1 x a)) (split1 (sigmoid x) a))) :named sigmoid_split1))
(assert (! (forall ((x Tensor) (p Int)) (= (sigmoid (transpose x p)) (transpose (sigmoid x) p))) :named sigmoid_transpose))

(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (tanh (repartition x d k)) (repartition (tanh x) d k))) :named tanh_repartition))
(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (tanh (combine x d k)) (combine (tanh x) d k))) :named tanh_combine))
(assert (! (forall ((x Tensor) (k Int)) (= (tanh (replicate x k)) (replicate (tanh x) k))) :named tanh_replicate))
(assert (! (forall ((x Tensor) (y Tensor) (a Int)) (= (tanh (concat x y a)) (concat (tanh x) (tanh y) a))) :named tanh_concat))
(assert (! (forall ((x Tensor) (a Int)) (= (tanh (split0 x a)) (split0 (tanh x) a))) :named tanh_split0))
(assert (! (forall ((x Tensor) (a Int)) (= (tanh (split1 x a)) (split1 (tanh x) a))) :named tanh_split1))
(assert (! (forall ((x Tensor) (p Int)) (= (tanh (transpose x p)) (transpose (tanh x) p))) :named tanh_transpose))

; Fused activations of Linear (codes: 2 gelu, 3 sigmoid, 4 tanh).
(assert (! (forall ((x Tensor) (w Tensor)) (= (gelu (linear x w 0)) (linear x w 2))) :named linear_gelu_fusion))
(assert (! (forall ((x Tensor) (w Tensor)) (= (sigmoid (linear x w 0)) (linear x w 3))) :named linear_sigmoid_fusion))
(assert (! (forall ((x Tensor) (w Tensor)) (= (tanh (linear x w 0)) (linear x w 4))) :named linear_tanh_fusion))

; Dropout's mask is a function of (seed, logical element index): every
; partitioning and every replica slot sees the same mask, and with the mask
; fixed Dropout is linear, so it also commutes with Reduce. It does not
; commute with Concat or Split of data dimensions (the indices move).
(assert (! (forall ((x Tensor) (r Int) (s Int) (d Int) (k Int)) (= (dropout (repartition x d k) r s) (repartition (dropout x r s) d k))) :named dropout_repartition))
(assert (! (forall ((x Tensor) (r Int) (s Int) (d Int) (k Int)) (= (dropout (combine x d k) r s) (combine (dropout x r s) d k))) :named dropout_combine))
(assert (! (forall ((x Tensor) (r Int) (s Int) (k Int)) (= (dropout (replicate x k) r s) (replicate (dropout x r s) k))) :named dropout_replicate))
(assert (! (forall ((x Tensor) (r Int) (s Int) (k Int)) (= (dropout (reduce x k) r s) (reduce (dropout x r s) k))) :named dropout_reduce))
; Rate 0 (bit pattern 0) keeps everything.
(assert (! (forall ((x Tensor) (s Int)) (= (dropout x 0 s) x)) :named dropout_rate_zero))
