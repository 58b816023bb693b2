; SoftmaxCrossEntropy and MSELoss: means over samples (rank-0 results).
; Split along sample dimensions, each task returns its share of the mean, so
; the shares are reduced. Domain: both sides legal, plus the conditions stated.
; Partial results of several split dimensions sit in the replica slots in
; dimension order, and Reduce sums consecutive slots: so the dimension whose
; shares are reduced must be the last one split (deg_after x d = 1).
(assert (! (forall ((x Tensor) (l Tensor) (d Int) (k Int))
  (=> (and (< d (- (rank x) 1)) (= (deg_after x d) 1)) (= (softmax_cross_entropy (combine x d k) (combine l d k)) (reduce (softmax_cross_entropy x l) k)))) :named cross_entropy_batch_parallel))
(assert (! (forall ((x Tensor) (l Tensor) (d Int) (k Int))
  (=> (and (< d (- (rank x) 1)) (= (deg_after x d) 1) (= (rep x) 1) (= (rep l) 1))
      (= (reduce (softmax_cross_entropy (repartition x d k) (repartition l d k)) k) (softmax_cross_entropy x l)))) :named cross_entropy_batch_parallel_split))
(assert (! (forall ((x Tensor) (l Tensor) (k Int))
  (=> (and (= (rep x) 1) (= (rep l) 1) (= (rep (softmax_cross_entropy x l)) 1)) (= (replicate (softmax_cross_entropy x l) k) (softmax_cross_entropy (replicate x k) (replicate l k))))) :named cross_entropy_replicate))
(assert (! (forall ((x Tensor) (y Tensor) (d Int) (k Int))
  (=> (= (deg_after x d) 1) (= (mse_loss (combine x d k) (combine y d k)) (reduce (mse_loss x y) k)))) :named mse_parallel))
(assert (! (forall ((x Tensor) (y Tensor) (d Int) (k Int))
  (=> (and (= (deg_after x d) 1) (= (rep x) 1) (= (rep y) 1)) (= (reduce (mse_loss (repartition x d k) (repartition y d k)) k) (mse_loss x y)))) :named mse_parallel_split))
(assert (! (forall ((x Tensor) (y Tensor) (k Int))
  (=> (and (= (rep x) 1) (= (rep y) 1) (= (rep (mse_loss x y)) 1)) (= (replicate (mse_loss x y) k) (mse_loss (replicate x k) (replicate y k))))) :named mse_replicate))
(assert (! (forall ((x Tensor) (y Tensor)) (= (mse_loss x y) (mse_loss y x))) :named mse_symmetric))
; A tensor's distance to itself is 0 in every shard (a share of a mean of
; zeros, or a copy of one) however the tensor is laid out: the zero losses
; of one tensor's layouts equal (sides of one parallel shape, as always).
(assert (! (forall ((x Tensor) (k Int))
  (= (mse_loss (replicate x k) (replicate x k)) (replicate (mse_loss x x) k))) :named mse_self_replicate))
(assert (! (forall ((x Tensor) (d Int) (k Int))
  (= (mse_loss (repartition x d k) (repartition x d k)) (replicate (mse_loss x x) k))) :named mse_self_repartition))
(assert (! (forall ((x Tensor) (k Int))
  (= (mse_loss (reduce x k) (reduce x k)) (reduce (mse_loss x x) k))) :named mse_self_reduce))
(assert (! (forall ((x Tensor) (y Tensor))
  (= (mse_loss (mse_loss x y) (mse_loss x y)) (mse_loss x x))) :named mse_self_of_a_loss))
; The cross-entropy split by classes (Megatron-LM's vocabulary-parallel
; cross-entropy, pcg/src/ops/loss_ops.cpp): it is its classes' blocks'
; log-sum-exp applied, for any block count dividing the classes (both sides
; legal). The blocks split with the classes; the apply split by classes,
; its labels and block values copied, gives partial sums, reduced (the
; classes are the last dimension, so their shares sit in consecutive slots).
(assert (! (forall ((x Tensor) (l Tensor) (b Int))
  (= (softmax_cross_entropy x l) (cross_entropy_apply x l (class_logsumexp x b)))) :named cross_entropy_is_blocks_applied))
(assert (! (forall ((x Tensor) (b Int) (d Int) (k Int))
  (= (class_logsumexp (repartition x d k) b) (repartition (class_logsumexp x b) d k))) :named class_logsumexp_repartition))
(assert (! (forall ((x Tensor) (b Int) (d Int) (k Int))
  (= (class_logsumexp (combine x d k) b) (combine (class_logsumexp x b) d k))) :named class_logsumexp_combine))
(assert (! (forall ((x Tensor) (b Int) (k Int))
  (= (class_logsumexp (replicate x k) b) (replicate (class_logsumexp x b) k))) :named class_logsumexp_replicate))
(assert (! (forall ((x Tensor) (l Tensor) (s Tensor) (d Int) (k Int))
  (=> (and (< d (- (rank x) 1)) (= (deg_after x d) 1))
      (= (cross_entropy_apply (combine x d k) (combine l d k) (combine s d k)) (reduce (cross_entropy_apply x l s) k)))) :named cross_entropy_apply_batch_parallel))
(assert (! (forall ((x Tensor) (l Tensor) (s Tensor) (d Int) (k Int))
  (=> (and (< d (- (rank x) 1)) (= (deg_after x d) 1) (= (rep x) 1) (= (rep l) 1) (= (rep s) 1))
      (= (reduce (cross_entropy_apply (repartition x d k) (repartition l d k) (repartition s d k)) k) (cross_entropy_apply x l s)))) :named cross_entropy_apply_batch_parallel_split))
(assert (! (forall ((x Tensor) (l Tensor) (s Tensor) (c Int) (k Int))
  (=> (and (= c (- (rank x) 1)) (= (rep x) 1) (= (rep l) 1) (= (rep s) 1))
      (= (reduce (cross_entropy_apply (repartition x c k) (replicate l k) (replicate s k)) k) (cross_entropy_apply x l s)))) :named cross_entropy_apply_class_parallel_split))
(assert (! (forall ((x Tensor) (l Tensor) (s Tensor) (k Int))
  (=> (and (= (rep x) 1) (= (rep l) 1) (= (rep s) 1) (= (rep (cross_entropy_apply x l s)) 1))
      (= (replicate (cross_entropy_apply x l s) k) (cross_entropy_apply (replicate x k) (replicate l k) (replicate s k))))) :named cross_entropy_apply_replicate))
