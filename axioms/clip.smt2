; Clip (x limited to [min, max]; ReLU6 is min 0, max 6): elementwise, so
; computed block by block and slot by slot. Its bounds are two exact
; fractions each (a b: min = a/b; c d: max = c/d). Not linear: it commutes
; with no Reduce of partial sums, and no axiom says so. Domain: any tensors
; and bounds on which both sides are legal.

(assert (! (forall ((x Tensor) (d Int) (k Int) (a Int) (b Int) (c Int) (e Int))
  (= (clip (repartition x d k) a b c e) (repartition (clip x a b c e) d k))) :named clip_repartition))
(assert (! (forall ((x Tensor) (d Int) (k Int) (a Int) (b Int) (c Int) (e Int))
  (= (clip (combine x d k) a b c e) (combine (clip x a b c e) d k))) :named clip_combine))
(assert (! (forall ((x Tensor) (k Int) (a Int) (b Int) (c Int) (e Int))
  (= (clip (replicate x k) a b c e) (replicate (clip x a b c e) k))) :named clip_replicate))
(assert (! (forall ((x Tensor) (y Tensor) (s Int) (a Int) (b Int) (c Int) (e Int))
  (= (clip (concat x y s) a b c e) (concat (clip x a b c e) (clip y a b c e) s))) :named clip_concat))
(assert (! (forall ((x Tensor) (s Int) (a Int) (b Int) (c Int) (e Int))
  (= (clip (split0 x s) a b c e) (split0 (clip x a b c e) s))) :named clip_split0))
(assert (! (forall ((x Tensor) (s Int) (a Int) (b Int) (c Int) (e Int))
  (= (clip (split1 x s) a b c e) (split1 (clip x a b c e) s))) :named clip_split1))
(assert (! (forall ((x Tensor) (p Int) (a Int) (b Int) (c Int) (e Int))
  (= (clip (transpose x p) a b c e) (transpose (clip x a b c e) p))) :named clip_transpose))
; Clipping twice to the same bounds is clipping once.
(assert (! (forall ((x Tensor) (a Int) (b Int) (c Int) (e Int))
  (= (clip (clip x a b c e) a b c e) (clip x a b c e))) :named clip_idempotent))
