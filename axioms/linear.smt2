; Linear: fusion, linearity, Concat, and its parallel forms (data, model,
; reduction, slot-wise). Domain: both sides legal, plus the conditions stated.

(assert (! (forall ((x Tensor) (w Tensor)) (= (relu (linear x w 0)) (linear x w 1))) :named linear_relu_fusion))
(assert (! (forall ((x Tensor) (y Tensor) (w Tensor)) (= (linear (ew_add x y) w 0) (ew_add (linear x w 0) (linear y w 0)))) :named linear_ew_add))
(assert (! (forall ((x Tensor) (w Tensor) (v Tensor)) (= (linear x (ew_add w v) 0) (ew_add (linear x w 0) (linear x v 0)))) :named linear_ew_add_weights))
; Output columns: concatenated weights give concatenated outputs.
(assert (! (forall ((x Tensor) (w Tensor) (v Tensor) (a Int))
  (= (linear x (concat w v 1) a) (concat (linear x w a) (linear x v a) (- (rank x) 1)))) :named linear_concat_columns))
; Contraction: concatenated inputs and weight rows give a sum.
(assert (! (forall ((x Tensor) (y Tensor) (w Tensor) (v Tensor))
  (= (linear (concat x y (- (rank x) 1)) (concat w v 0) 0) (ew_add (linear x w 0) (linear y v 0)))) :named linear_concat_rows))
; Batch dimensions: concatenated inputs give concatenated outputs.
(assert (! (forall ((x Tensor) (y Tensor) (w Tensor) (d Int) (a Int))
  (=> (and (<= 0 d) (< d (- (rank x) 1))) (= (linear (concat x y d) w a) (concat (linear x w a) (linear y w a) d)))) :named linear_concat_batch))

; Data parallelism: a batch dimension split, the weight replicated. Only for
; an unreplicated weight: the slots Replicate adds come after any the weight
; has, which is not where the task grid puts a batch split in general.
(assert (! (forall ((x Tensor) (w Tensor) (d Int) (k Int) (a Int))
  (=> (and (< d (- (rank x) 1)) (= (rep w) 1))
      (= (linear (combine x d k) w a) (combine (linear x (replicate w k) a) d k)))) :named linear_data_parallel))
(assert (! (forall ((x Tensor) (w Tensor) (d Int) (k Int) (a Int))
  (=> (and (< d (- (rank x) 1)) (= (rep w) 1))
      (= (repartition (linear x w a) d k) (linear (repartition x d k) (replicate w k) a)))) :named linear_data_parallel_split))
; Model parallelism: the weight split by columns, the input replicated.
(assert (! (forall ((x Tensor) (w Tensor) (k Int) (a Int))
  (= (linear x (combine w 1 k) a) (combine (linear (replicate x k) w a) (- (rank x) 1) k))) :named linear_model_parallel))
; Reduction parallelism: the contraction dimension split on both, partial sums reduced.
(assert (! (forall ((x Tensor) (w Tensor) (k Int))
  (= (linear (combine x (- (rank x) 1) k) (combine w 0 k) 0) (reduce (linear x w 0) k))) :named linear_reduction_parallel))
; Reducing the input first, or the products after: for an unreplicated
; weight, and a result without partial sums of its own.
(assert (! (forall ((x Tensor) (w Tensor) (k Int))
  (=> (and (= (rep w) 1) (= (rep (linear (reduce x k) w 0)) 1))
      (= (linear (reduce x k) w 0) (reduce (linear x (replicate w k) 0) k)))) :named linear_reduce_input))
; Slot-wise: replicated operands give a replicated result, for operands and
; a result without slots of their own (Replicate puts its copies after
; existing slots; the task grid orders them differently).
(assert (! (forall ((x Tensor) (w Tensor) (k Int) (a Int))
  (=> (and (= (rep x) 1) (= (rep w) 1) (= (rep (linear x w a)) 1))
      (= (replicate (linear x w a) k) (linear (replicate x k) (replicate w k) a)))) :named linear_replicate))
; Copies of a product whose weight is copies of one whole tensor (its
; input's samples split, the weight copied to each task): every slot of
; the weight holds the same values, so whatever slot a task of the copied
; product reads, it reads them (Megatron-LM's products on every device of
; a tensor-parallel group where a weight is not split, as grouped-query
; attention's one key head, beside data parallelism). Not where the
; weight is split: its slots then hold different blocks.
(assert (! (forall ((x Tensor) (w Tensor) (m Int) (k Int) (a Int))
  (=> (and (= (rep w) 1) (= (deg_after w (- 1)) 1))
      (= (replicate (linear x (replicate w m) a) k) (linear (replicate x k) (replicate (replicate w m) k) a)))) :named linear_replicate_copies))

; Splitting a batch dimension before or after Linear.
(assert (! (forall ((x Tensor) (w Tensor) (d Int) (a Int))
  (=> (and (<= 0 d) (< d (- (rank x) 1))) (= (linear (split0 x d) w a) (split0 (linear x w a) d)))) :named linear_split0_batch))
(assert (! (forall ((x Tensor) (w Tensor) (d Int) (a Int))
  (=> (and (<= 0 d) (< d (- (rank x) 1))) (= (linear (split1 x d) w a) (split1 (linear x w a) d)))) :named linear_split1_batch))

; A factor of two moves between the operands (the products are the same,
; so it holds under a fused activation too).
(assert (! (forall ((x Tensor) (w Tensor) (a Int)) (= (linear (ew_add x x) w a) (linear x (ew_add w w) a))) :named linear_double))
; Model parallelism, split form: columns of the weight split, the
; unreplicated input replicated.
(assert (! (forall ((x Tensor) (w Tensor) (k Int) (a Int))
  (=> (and (= (rep x) 1) (= (rep w) 1))
      (= (repartition (linear x w a) (- (rank x) 1) k) (linear (replicate x k) (repartition w 1 k) a)))) :named linear_model_parallel_split))

; With a bias b[out] (linear_bias): the same parallel forms, the bias
; following the weight's columns: copied where the weight is copied, split
; where its columns are, and under reduction parallelism k slots of b/k,
; whose sum is b (as the plans lay it out: search/baselines.h).
(assert (! (forall ((x Tensor) (w Tensor) (b Tensor) (d Int) (k Int) (a Int))
  (=> (and (< d (- (rank x) 1)) (= (rep w) 1) (= (rep b) 1))
      (= (repartition (linear_bias x w b a) d k) (linear_bias (repartition x d k) (replicate w k) (replicate b k) a)))) :named linear_bias_data_parallel_split))
(assert (! (forall ((x Tensor) (w Tensor) (b Tensor) (d Int) (k Int) (a Int))
  (=> (and (< d (- (rank x) 1)) (= (rep w) 1) (= (rep b) 1))
      (= (linear_bias (combine x d k) w b a) (combine (linear_bias x (replicate w k) (replicate b k) a) d k)))) :named linear_bias_data_parallel))
(assert (! (forall ((x Tensor) (w Tensor) (b Tensor) (k Int) (a Int))
  (=> (and (= (rep x) 1) (= (rep w) 1) (= (rep b) 1))
      (= (repartition (linear_bias x w b a) (- (rank x) 1) k) (linear_bias (replicate x k) (repartition w 1 k) (repartition b 0 k) a)))) :named linear_bias_model_parallel_split))
(assert (! (forall ((x Tensor) (w Tensor) (b Tensor) (k Int) (a Int))
  (=> (and (= (rep x) 1) (= (rep w) 1) (= (rep b) 1) (= (rep (linear_bias x w b a)) 1))
      (= (replicate (linear_bias x w b a) k) (linear_bias (replicate x k) (replicate w k) (replicate b k) a)))) :named linear_bias_replicate))
(assert (! (forall ((x Tensor) (w Tensor) (b Tensor) (k Int))
  (=> (= (rep b) 1)
      (= (linear_bias (combine x (- (rank x) 1) k) (combine w 0 k) b 0) (reduce (linear_bias x w (replicate (scalar_mul b 1 k) k) 0) k)))) :named linear_bias_reduction_parallel))
; With data parallelism beside: the bias copied r times first (so every
; copy becomes its own k summands), the weight carrying r copies, the
; input none of its own.
(assert (! (forall ((x Tensor) (w Tensor) (b Tensor) (r Int) (k Int))
  (=> (and (= (rep b) 1) (= (rep x) 1) (= (rep w) r))
      (= (linear_bias (combine x (- (rank x) 1) k) (combine w 0 k) (replicate b r) 0)
         (reduce (linear_bias x w (replicate (scalar_mul (replicate b r) 1 k) k) 0) k)))) :named linear_bias_reduction_parallel_copies))
