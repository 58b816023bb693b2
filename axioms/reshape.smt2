; Reshape reinterprets row-major data. Domain: both sides legal and of one
; parallel shape (which is what makes reshape_identity hold), plus the
; conditions stated.

; A dimension d can be split before or after a Reshape when the sizes before
; it agree (then every block is a contiguous run of the data).
(assert (! (forall ((x Tensor) (s Int) (d Int) (k Int))
  (=> (= (reshape_keeps x s d) 1) (= (reshape (repartition x d k) s) (repartition (reshape x s) d k)))) :named reshape_repartition))
(assert (! (forall ((x Tensor) (s Int) (d Int) (k Int))
  (=> (= (reshape_keeps x s d) 1) (= (reshape (combine x d k) s) (combine (reshape x s) d k)))) :named reshape_combine))
; Slots are reshaped one by one.
(assert (! (forall ((x Tensor) (s Int) (k Int)) (= (reshape (replicate x k) s) (replicate (reshape x s) k))) :named reshape_replicate))
(assert (! (forall ((x Tensor) (s Int) (k Int)) (= (reshape (reduce x k) s) (reduce (reshape x s) k))) :named reshape_reduce))
; Reshapes compose, and a Reshape to the tensor's own shape does nothing.
(assert (! (forall ((x Tensor) (s Int) (t Int)) (= (reshape (reshape x s) t) (reshape x t))) :named reshape_reshape))
(assert (! (forall ((x Tensor) (s Int)) (= (reshape x s) x)) :named reshape_identity))
; Elementwise operators do not care about the shape.
(assert (! (forall ((x Tensor) (s Int)) (= (relu (reshape x s)) (reshape (relu x) s))) :named relu_reshape))
(assert (! (forall ((x Tensor) (s Int)) (= (gelu (reshape x s)) (reshape (gelu x) s))) :named gelu_reshape))
(assert (! (forall ((x Tensor) (s Int)) (= (sigmoid (reshape x s)) (reshape (sigmoid x) s))) :named sigmoid_reshape))
(assert (! (forall ((x Tensor) (s Int)) (= (tanh (reshape x s)) (reshape (tanh x) s))) :named tanh_reshape))
(assert (! (forall ((x Tensor) (y Tensor) (s Int)) (= (ew_add (reshape x s) (reshape y s)) (reshape (ew_add x y) s))) :named ew_add_reshape))
(assert (! (forall ((x Tensor) (y Tensor) (s Int)) (= (ew_mul (reshape x s) (reshape y s)) (reshape (ew_mul x y) s))) :named ew_mul_reshape))
(assert (! (forall ((x Tensor) (s Int) (n Int) (m Int)) (= (scalar_mul (reshape x s) n m) (reshape (scalar_mul x n m) s))) :named scalar_mul_reshape))
