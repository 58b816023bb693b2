; Conv2D (NCHW, weights [O, C/groups, kh, kw], no bias) and Pool2D: fusion,
; linearity and parallel forms. Domain: both sides legal, plus the
; conditions stated; Replicate only on unreplicated operands and results
; without partial sums (its copies go after existing slots). Grouped
; convolutions' channel-group parallelism has no axiom yet.

; Fused activations (codes: 1 relu, 2 gelu, 3 sigmoid, 4 tanh).
(assert (! (forall ((x Tensor) (w Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (g Int))
  (= (relu (conv2d x w sh sw ph pw g 0)) (conv2d x w sh sw ph pw g 1))) :named conv_relu_fusion))
(assert (! (forall ((x Tensor) (w Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (g Int))
  (= (gelu (conv2d x w sh sw ph pw g 0)) (conv2d x w sh sw ph pw g 2))) :named conv_gelu_fusion))
(assert (! (forall ((x Tensor) (w Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (g Int))
  (= (sigmoid (conv2d x w sh sw ph pw g 0)) (conv2d x w sh sw ph pw g 3))) :named conv_sigmoid_fusion))
(assert (! (forall ((x Tensor) (w Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (g Int))
  (= (tanh (conv2d x w sh sw ph pw g 0)) (conv2d x w sh sw ph pw g 4))) :named conv_tanh_fusion))
; Linear in the input and in the weights (zero padding keeps it linear).
(assert (! (forall ((x Tensor) (y Tensor) (w Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (g Int))
  (= (conv2d (ew_add x y) w sh sw ph pw g 0) (ew_add (conv2d x w sh sw ph pw g 0) (conv2d y w sh sw ph pw g 0)))) :named conv_ew_add_input))
(assert (! (forall ((x Tensor) (w Tensor) (v Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (g Int))
  (= (conv2d x (ew_add w v) sh sw ph pw g 0) (ew_add (conv2d x w sh sw ph pw g 0) (conv2d x v sh sw ph pw g 0)))) :named conv_ew_add_weights))
; Concatenated batches, and (ungrouped) concatenated output channels.
(assert (! (forall ((x Tensor) (y Tensor) (w Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (g Int) (a Int))
  (= (conv2d (concat x y 0) w sh sw ph pw g a) (concat (conv2d x w sh sw ph pw g a) (conv2d y w sh sw ph pw g a) 0))) :named conv_concat_batch))
(assert (! (forall ((x Tensor) (w Tensor) (v Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (a Int))
  (= (conv2d x (concat w v 0) sh sw ph pw 1 a) (concat (conv2d x w sh sw ph pw 1 a) (conv2d x v sh sw ph pw 1 a) 1))) :named conv_concat_out_channels))
; Data parallelism: the batch split, the weights copied.
(assert (! (forall ((x Tensor) (w Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (g Int) (a Int) (k Int))
  (=> (= (rep w) 1) (= (repartition (conv2d x w sh sw ph pw g a) 0 k) (conv2d (repartition x 0 k) (replicate w k) sh sw ph pw g a)))) :named conv_data_parallel_split))
(assert (! (forall ((x Tensor) (w Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (g Int) (a Int) (k Int))
  (=> (= (rep w) 1) (= (conv2d (combine x 0 k) w sh sw ph pw g a) (combine (conv2d x (replicate w k) sh sw ph pw g a) 0 k)))) :named conv_data_parallel))
; Model parallelism: output channels split with the weights, the input copied.
(assert (! (forall ((x Tensor) (w Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (a Int) (k Int))
  (=> (and (= (rep x) 1) (= (rep w) 1)) (= (repartition (conv2d x w sh sw ph pw 1 a) 1 k) (conv2d (replicate x k) (repartition w 0 k) sh sw ph pw 1 a)))) :named conv_model_parallel_split))
(assert (! (forall ((x Tensor) (w Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (a Int) (k Int))
  (=> (= (rep x) 1) (= (conv2d x (combine w 0 k) sh sw ph pw 1 a) (combine (conv2d (replicate x k) w sh sw ph pw 1 a) 1 k)))) :named conv_model_parallel))
; Reduction parallelism: input channels split on both, partial sums reduced.
(assert (! (forall ((x Tensor) (w Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (k Int))
  (= (conv2d (combine x 1 k) (combine w 1 k) sh sw ph pw 1 0) (reduce (conv2d x w sh sw ph pw 1 0) k))) :named conv_reduction_parallel))
(assert (! (forall ((x Tensor) (w Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (g Int) (a Int) (k Int))
  (=> (and (= (rep x) 1) (= (rep w) 1) (= (rep (conv2d x w sh sw ph pw g a)) 1))
      (= (replicate (conv2d x w sh sw ph pw g a) k) (conv2d (replicate x k) (replicate w k) sh sw ph pw g a)))) :named conv_replicate))
; The same for operands with equal slots of their own and no dimension
; split: every task is one slot's convolution, whatever the slots' order.
(assert (! (forall ((x Tensor) (w Tensor) (sh Int) (sw Int) (ph Int) (pw Int) (g Int) (a Int) (k Int))
  (=> (and (= (deg_after x (- 1)) 1) (= (deg_after w (- 1)) 1) (= (rep w) (rep x)) (= (rep (conv2d x w sh sw ph pw g a)) (rep x)))
      (= (replicate (conv2d x w sh sw ph pw g a) k) (conv2d (replicate x k) (replicate w k) sh sw ph pw g a)))) :named conv_replicate_slotwise))

; Pool2D: batch and channels split; slots pooled one by one; average
; pooling is linear.
(assert (! (forall ((x Tensor) (kh Int) (kw Int) (sh Int) (sw Int) (ph Int) (pw Int) (m Int) (d Int) (k Int))
  (=> (or (= d 0) (= d 1)) (= (pool2d (repartition x d k) kh kw sh sw ph pw m) (repartition (pool2d x kh kw sh sw ph pw m) d k)))) :named pool_repartition))
(assert (! (forall ((x Tensor) (kh Int) (kw Int) (sh Int) (sw Int) (ph Int) (pw Int) (m Int) (d Int) (k Int))
  (=> (or (= d 0) (= d 1)) (= (pool2d (combine x d k) kh kw sh sw ph pw m) (combine (pool2d x kh kw sh sw ph pw m) d k)))) :named pool_combine))
(assert (! (forall ((x Tensor) (kh Int) (kw Int) (sh Int) (sw Int) (ph Int) (pw Int) (m Int) (k Int))
  (= (pool2d (replicate x k) kh kw sh sw ph pw m) (replicate (pool2d x kh kw sh sw ph pw m) k))) :named pool_replicate))
(assert (! (forall ((x Tensor) (y Tensor) (kh Int) (kw Int) (sh Int) (sw Int) (ph Int) (pw Int) (m Int) (a Int))
  (=> (or (= a 0) (= a 1)) (= (pool2d (concat x y a) kh kw sh sw ph pw m) (concat (pool2d x kh kw sh sw ph pw m) (pool2d y kh kw sh sw ph pw m) a)))) :named pool_concat))
(assert (! (forall ((x Tensor) (kh Int) (kw Int) (sh Int) (sw Int) (ph Int) (pw Int) (k Int))
  (= (pool2d (reduce x k) kh kw sh sw ph pw 1) (reduce (pool2d x kh kw sh sw ph pw 1) k))) :named avg_pool_reduce))
(assert (! (forall ((x Tensor) (y Tensor) (kh Int) (kw Int) (sh Int) (sw Int) (ph Int) (pw Int))
  (= (pool2d (ew_add x y) kh kw sh sw ph pw 1) (ew_add (pool2d x kh kw sh sw ph pw 1) (pool2d y kh kw sh sw ph pw 1)))) :named avg_pool_ew_add))
; Input channels concatenated on both operands (ungrouped): a sum of the
; two convolutions.
(assert (! (forall ((x Tensor) (y Tensor) (w Tensor) (v Tensor) (sh Int) (sw Int) (ph Int) (pw Int))
  (= (conv2d (concat x y 1) (concat w v 1) sh sw ph pw 1 0) (ew_add (conv2d x w sh sw ph pw 1 0) (conv2d y v sh sw ph pw 1 0)))) :named conv_concat_in_channels))
