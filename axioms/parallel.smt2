; Identities among the parallelization operators (docs/design.md table).
; Domain: any tensor on which both sides are legal.

; Combine undoes Repartition, and Repartition undoes Combine.
(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (combine (repartition x d k) d k) x)) :named combine_repartition))
(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (repartition (combine x d k) d k) x)) :named repartition_combine))
; Splits and merges of different dimensions commute.
(assert (! (forall ((x Tensor) (d Int) (k Int) (e Int) (j Int))
  (=> (distinct d e) (= (repartition (repartition x d k) e j) (repartition (repartition x e j) d k)))) :named repartition_commute))
(assert (! (forall ((x Tensor) (d Int) (k Int) (e Int) (j Int))
  (=> (distinct d e) (= (combine (combine x d k) e j) (combine (combine x e j) d k)))) :named combine_commute))
(assert (! (forall ((x Tensor) (d Int) (k Int) (e Int) (j Int))
  (=> (distinct d e) (= (repartition (combine x d k) e j) (combine (repartition x e j) d k)))) :named repartition_combine_commute))
; Splitting a dimension's blocks k ways and each of them j ways is splitting it k j ways (shard i
; becomes i k + a, then (i k + a) j + b = i k j + (a j + b): the blocks stay in order); merging
; likewise; copying each slot k times and each copy j times is copying it k j times. A layout
; change may take its steps in parts (layout_search.h: a reduce-scatter, then an all-to-all).
(assert (! (forall ((x Tensor) (d Int) (k Int) (j Int)) (= (repartition (repartition x d k) d j) (repartition x d (* k j)))) :named repartition_repartition))
(assert (! (forall ((x Tensor) (d Int) (k Int) (j Int)) (= (combine (combine x d k) d j) (combine x d (* k j)))) :named combine_combine))
(assert (! (forall ((x Tensor) (k Int) (j Int)) (= (replicate (replicate x k) j) (replicate x (* k j)))) :named replicate_replicate))
; Replica operators act on slots, Repartition and Combine on blocks: they commute.
(assert (! (forall ((x Tensor) (d Int) (k Int) (j Int)) (= (replicate (repartition x d k) j) (repartition (replicate x j) d k))) :named replicate_repartition))
(assert (! (forall ((x Tensor) (d Int) (k Int) (j Int)) (= (replicate (combine x d k) j) (combine (replicate x j) d k))) :named replicate_combine))
(assert (! (forall ((x Tensor) (d Int) (k Int) (j Int)) (= (reduce (repartition x d k) j) (repartition (reduce x j) d k))) :named reduce_repartition))
(assert (! (forall ((x Tensor) (d Int) (k Int) (j Int)) (= (reduce (combine x d k) j) (combine (reduce x j) d k))) :named reduce_combine))
; Reduce(2) of Replicate(2) doubles.
(assert (! (forall ((x Tensor)) (= (reduce (replicate x 2) 2) (ew_add x x))) :named reduce_replicate_2))
; Unity's hybrid rewrite, for unreplicated operands: concatenating replica slots and reducing adds.
(assert (! (forall ((x Tensor) (y Tensor))
  (=> (and (= (rep x) 1) (= (rep y) 1)) (= (reduce (concat x y (- 1)) 2) (ew_add x y)))) :named reduce_replica_concat))
; Replicating an unreplicated tensor twice is concatenating it with itself on the replica axis.
(assert (! (forall ((x Tensor)) (=> (= (rep x) 1) (= (replicate x 2) (concat x x (- 1))))) :named replicate_as_replica_concat))
; AllReduce is Reduce then Replicate (docs/design.md table).
(assert (! (forall ((x Tensor) (k Int)) (= (all_reduce x k) (replicate (reduce x k) k))) :named all_reduce_definition))
