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

; Concat is associative, and concatenations along two different data axes
; interchange (the four blocks are the same).
(assert (! (forall ((x Tensor) (y Tensor) (z Tensor) (a Int))
  (= (concat (concat x y a) z a) (concat x (concat y z a) a))) :named concat_associative))
(assert (! (forall ((x Tensor) (y Tensor) (u Tensor) (v Tensor) (a Int) (b Int))
  (=> (and (distinct a b) (<= 0 a) (<= 0 b))
      (= (concat (concat x y a) (concat u v a) b) (concat (concat x u b) (concat y v b) a)))) :named concat_interchange))

; Split commutes with what works block by block, along another axis for
; Repartition and Combine, along a data axis for the replica operators.
(assert (! (forall ((x Tensor) (a Int)) (= (relu (split0 x a)) (split0 (relu x) a))) :named relu_split0))
(assert (! (forall ((x Tensor) (a Int)) (= (relu (split1 x a)) (split1 (relu x) a))) :named relu_split1))
(assert (! (forall ((x Tensor) (y Tensor) (a Int)) (= (ew_add (split0 x a) (split0 y a)) (split0 (ew_add x y) a))) :named ew_add_split0))
(assert (! (forall ((x Tensor) (y Tensor) (a Int)) (= (ew_add (split1 x a) (split1 y a)) (split1 (ew_add x y) a))) :named ew_add_split1))
(assert (! (forall ((x Tensor) (y Tensor) (a Int)) (= (ew_mul (split0 x a) (split0 y a)) (split0 (ew_mul x y) a))) :named ew_mul_split0))
(assert (! (forall ((x Tensor) (y Tensor) (a Int)) (= (ew_mul (split1 x a) (split1 y a)) (split1 (ew_mul x y) a))) :named ew_mul_split1))
(assert (! (forall ((x Tensor) (a Int) (d Int) (k Int))
  (=> (distinct a d) (= (repartition (split0 x a) d k) (split0 (repartition x d k) a)))) :named repartition_split0))
(assert (! (forall ((x Tensor) (a Int) (d Int) (k Int))
  (=> (distinct a d) (= (repartition (split1 x a) d k) (split1 (repartition x d k) a)))) :named repartition_split1))
(assert (! (forall ((x Tensor) (a Int) (d Int) (k Int))
  (=> (distinct a d) (= (combine (split0 x a) d k) (split0 (combine x d k) a)))) :named combine_split0))
(assert (! (forall ((x Tensor) (a Int) (d Int) (k Int))
  (=> (distinct a d) (= (combine (split1 x a) d k) (split1 (combine x d k) a)))) :named combine_split1))
(assert (! (forall ((x Tensor) (a Int) (k Int))
  (=> (<= 0 a) (= (replicate (split0 x a) k) (split0 (replicate x k) a)))) :named replicate_split0))
(assert (! (forall ((x Tensor) (a Int) (k Int))
  (=> (<= 0 a) (= (replicate (split1 x a) k) (split1 (replicate x k) a)))) :named replicate_split1))
(assert (! (forall ((x Tensor) (a Int) (k Int))
  (=> (<= 0 a) (= (reduce (split0 x a) k) (split0 (reduce x k) a)))) :named reduce_split0))
(assert (! (forall ((x Tensor) (a Int) (k Int))
  (=> (<= 0 a) (= (reduce (split1 x a) k) (split1 (reduce x k) a)))) :named reduce_split1))
