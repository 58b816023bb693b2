; Concat and Split: identities, and commutation with elementwise and
; parallel operators. Split halves a dimension (or the replica slots).

(assert (! (forall ((x Tensor) (y Tensor) (a Int))
  (=> (= (extent x a) (extent y a)) (= (split0 (concat x y a) a) x))) :named split0_concat))
(assert (! (forall ((x Tensor) (y Tensor) (a Int))
  (=> (= (extent x a) (extent y a)) (= (split1 (concat x y a) a) y))) :named split1_concat))
(assert (! (forall ((x Tensor) (a Int)) (= (concat (split0 x a) (split1 x a) a) x)) :named concat_split))

(assert (! (forall ((x Tensor) (y Tensor) (a Int)) (= (relu (concat x y a)) (concat (relu x) (relu y) a))) :named relu_concat))
(assert (! (forall ((x Tensor) (y Tensor) (u Tensor) (v Tensor) (a Int))
  (=> (= (extent x a) (extent u a)) (= (ew_add (concat x y a) (concat u v a)) (concat (ew_add x u) (ew_add y v) a)))) :named ew_add_concat))
(assert (! (forall ((x Tensor) (y Tensor) (u Tensor) (v Tensor) (a Int))
  (=> (= (extent x a) (extent u a)) (= (ew_mul (concat x y a) (concat u v a)) (concat (ew_mul x u) (ew_mul y v) a)))) :named ew_mul_concat))
; A split or merge of another dimension passes through Concat, also on the replica axis.
(assert (! (forall ((x Tensor) (y Tensor) (a Int) (d Int) (k Int))
  (=> (distinct a d) (= (repartition (concat x y a) d k) (concat (repartition x d k) (repartition y d k) a)))) :named repartition_concat))
(assert (! (forall ((x Tensor) (y Tensor) (a Int) (d Int) (k Int))
  (=> (distinct a d) (= (combine (concat x y a) d k) (concat (combine x d k) (combine y d k) a)))) :named combine_concat))
; Replica operators pass through a Concat of data dimensions.
(assert (! (forall ((x Tensor) (y Tensor) (a Int) (k Int))
  (=> (<= 0 a) (= (replicate (concat x y a) k) (concat (replicate x k) (replicate y k) a)))) :named replicate_concat))
(assert (! (forall ((x Tensor) (y Tensor) (a Int) (k Int))
  (=> (<= 0 a) (= (reduce (concat x y a) k) (concat (reduce x k) (reduce y k) a)))) :named reduce_concat))
