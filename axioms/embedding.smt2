; Embedding (out[..., :] = table[idx[...], :]) and EmbeddingBag (the sum of
; a bag's rows): their parallel forms. A table split by rows gives partial
; sums (a task adds the rows it owns). Domain: both sides legal, plus the
; conditions stated; Replicate only on unreplicated operands.

; Index dimensions split, the table copied.
(assert (! (forall ((i Tensor) (t Tensor) (d Int) (k Int))
  (=> (and (< d (rank i)) (= (rep t) 1)) (= (repartition (embedding i t) d k) (embedding (repartition i d k) (replicate t k))))) :named embedding_batch_split))
(assert (! (forall ((i Tensor) (t Tensor) (d Int) (k Int))
  (=> (and (< d (rank i)) (= (rep t) 1)) (= (embedding (combine i d k) t) (combine (embedding i (replicate t k)) d k)))) :named embedding_batch_combine))
; Table columns split, the indices copied.
(assert (! (forall ((i Tensor) (t Tensor) (k Int))
  (=> (and (= (rep i) 1) (= (rep t) 1)) (= (repartition (embedding i t) (rank i) k) (embedding (replicate i k) (repartition t 1 k))))) :named embedding_columns_split))
(assert (! (forall ((i Tensor) (t Tensor) (k Int))
  (=> (= (rep i) 1) (= (embedding i (combine t 1 k)) (combine (embedding (replicate i k) t) (rank i) k)))) :named embedding_columns_combine))
; Table rows split: partial sums, reduced.
(assert (! (forall ((i Tensor) (t Tensor) (k Int))
  (=> (and (= (rep i) 1) (= (rep t) 1)) (= (reduce (embedding (replicate i k) (repartition t 0 k)) k) (embedding i t)))) :named embedding_rows_split))
(assert (! (forall ((i Tensor) (t Tensor) (k Int))
  (=> (= (rep i) 1) (= (embedding i (combine t 0 k)) (reduce (embedding (replicate i k) t) k)))) :named embedding_rows_combine))
(assert (! (forall ((i Tensor) (t Tensor) (k Int))
  (=> (and (= (rep i) 1) (= (rep t) 1)) (= (replicate (embedding i t) k) (embedding (replicate i k) (replicate t k))))) :named embedding_replicate))
; Copies of a lookup whose table is copies of one whole tensor (its indices
; split, the table copied to each task): every slot of the table holds the
; same rows, so whatever slot a task of the copied lookup reads, it reads
; them (Megatron-LM's position embedding on every device of a
; tensor-parallel group, beside data parallelism). Not where the table is
; split: its slots then hold different blocks.
(assert (! (forall ((i Tensor) (t Tensor) (m Int) (k Int))
  (=> (and (= (rep t) 1) (= (deg_after t (- 1)) 1))
      (= (replicate (embedding i (replicate t m)) k) (embedding (replicate i k) (replicate (replicate t m) k))))) :named embedding_replicate_copies))
; Linear in the table; concatenated columns give concatenated outputs.
(assert (! (forall ((i Tensor) (t Tensor) (u Tensor)) (= (embedding i (ew_add t u)) (ew_add (embedding i t) (embedding i u)))) :named embedding_table_ew_add))
(assert (! (forall ((i Tensor) (t Tensor) (u Tensor)) (= (embedding i (concat t u 1)) (concat (embedding i t) (embedding i u) (rank i)))) :named embedding_table_concat))

; EmbeddingBag: the batch (dimension 0) splits; a split bag (dimension 1)
; gives partial sums; the table splits by columns or (partial) by rows.
(assert (! (forall ((i Tensor) (t Tensor) (k Int))
  (=> (= (rep t) 1) (= (repartition (embedding_bag i t) 0 k) (embedding_bag (repartition i 0 k) (replicate t k))))) :named embedding_bag_batch_split))
(assert (! (forall ((i Tensor) (t Tensor) (k Int))
  (=> (= (rep t) 1) (= (embedding_bag (combine i 0 k) t) (combine (embedding_bag i (replicate t k)) 0 k)))) :named embedding_bag_batch_combine))
(assert (! (forall ((i Tensor) (t Tensor) (k Int))
  (=> (and (= (rep i) 1) (= (rep t) 1)) (= (reduce (embedding_bag (repartition i 1 k) (replicate t k)) k) (embedding_bag i t)))) :named embedding_bag_bag_split))
(assert (! (forall ((i Tensor) (t Tensor) (k Int))
  (=> (and (= (rep i) 1) (= (rep t) 1)) (= (embedding_bag (combine i 1 k) t) (reduce (embedding_bag i (replicate t k)) k)))) :named embedding_bag_bag_combine))
(assert (! (forall ((i Tensor) (t Tensor) (k Int))
  (=> (and (= (rep i) 1) (= (rep t) 1)) (= (repartition (embedding_bag i t) 1 k) (embedding_bag (replicate i k) (repartition t 1 k))))) :named embedding_bag_columns_split))
(assert (! (forall ((i Tensor) (t Tensor) (k Int))
  (=> (= (rep i) 1) (= (embedding_bag i (combine t 1 k)) (combine (embedding_bag (replicate i k) t) 1 k)))) :named embedding_bag_columns_combine))
(assert (! (forall ((i Tensor) (t Tensor) (k Int))
  (=> (and (= (rep i) 1) (= (rep t) 1)) (= (reduce (embedding_bag (replicate i k) (repartition t 0 k)) k) (embedding_bag i t)))) :named embedding_bag_rows_split))
(assert (! (forall ((i Tensor) (t Tensor) (k Int))
  (=> (= (rep i) 1) (= (embedding_bag i (combine t 0 k)) (reduce (embedding_bag (replicate i k) t) k)))) :named embedding_bag_rows_combine))
(assert (! (forall ((i Tensor) (t Tensor) (k Int))
  (=> (and (= (rep i) 1) (= (rep t) 1)) (= (replicate (embedding_bag i t) k) (embedding_bag (replicate i k) (replicate t k))))) :named embedding_bag_replicate))
(assert (! (forall ((i Tensor) (t Tensor) (u Tensor)) (= (embedding_bag i (ew_add t u)) (ew_add (embedding_bag i t) (embedding_bag i u)))) :named embedding_bag_table_ew_add))
(assert (! (forall ((i Tensor) (t Tensor) (u Tensor)) (= (embedding_bag i (concat t u 1)) (concat (embedding_bag i t) (embedding_bag i u) 1))) :named embedding_bag_table_concat))
; Embedding only selects rows: elementwise operators on the table commute
; with it. A table split by rows leaves zeros where a task owns no row, so an
; operator with f(0) != 0 (Sigmoid) needs an unsplit table.
(assert (! (forall ((i Tensor) (t Tensor)) (= (embedding i (relu t)) (relu (embedding i t)))) :named embedding_relu))
(assert (! (forall ((i Tensor) (t Tensor)) (= (embedding i (gelu t)) (gelu (embedding i t)))) :named embedding_gelu))
(assert (! (forall ((i Tensor) (t Tensor)) (=> (= (deg t 0) 1) (= (embedding i (sigmoid t)) (sigmoid (embedding i t))))) :named embedding_sigmoid))
(assert (! (forall ((i Tensor) (t Tensor)) (= (embedding i (tanh t)) (tanh (embedding i t)))) :named embedding_tanh))
(assert (! (forall ((i Tensor) (t Tensor) (u Tensor)) (= (embedding i (ew_mul t u)) (ew_mul (embedding i t) (embedding i u)))) :named embedding_ew_mul))
(assert (! (forall ((i Tensor) (t Tensor) (n Int) (m Int)) (= (embedding i (scalar_mul t n m)) (scalar_mul (embedding i t) n m))) :named embedding_scalar_mul))
(assert (! (forall ((i Tensor) (t Tensor) (n Int) (m Int)) (= (embedding_bag i (scalar_mul t n m)) (scalar_mul (embedding_bag i t) n m))) :named embedding_bag_scalar_mul))
