//! The client's vector-index requests: defining an index on every replica, and searching
//! one by vector, by text's meaning, by keywords, or both fused.

use super::retry::Kind;
use super::Client;
use crate::error::ClientError;
use crate::pb;

impl Client {
    /// Create the vector index `name` over the keys under `prefix` on every replica of every
    /// shard;
    /// returns the log index it was applied at. Defining an index again as it is succeeds.
    /// Its values are then vector records (`shale_search::semantic::vector_value`) of `dim`
    /// components.
    ///
    /// # Errors
    /// `Refused` for a bad definition, a name taken by another definition, a prefix that
    /// shares keys with another index's or whose keys already hold values; see
    /// [`ClientError`].
    pub async fn define_index(
        &self,
        name: &str,
        prefix: &[u8],
        dim: u32,
        metric: pb::Metric,
    ) -> Result<u64, ClientError> {
        self.define_index_with(pb::DefineIndexRequest {
            name: name.to_owned(),
            prefix: prefix.to_vec(),
            dim,
            metric: metric.into(),
            model: pb::Model::Vectors.into(),
            ..Default::default()
        })
        .await
    }

    /// [`Client::define_index`] with every field of the request: an index with a model
    /// (`model`, `dim` its dimension) holds texts that every replica embeds, searched by
    /// text ([`Client::search_text`]) or vector.
    ///
    /// Over a key space split into shards, the index is defined in every shard's group,
    /// one after the other (the log index returned is the last group's): a failure may
    /// leave it defined in the groups before, and defining it again completes it.
    ///
    /// # Errors
    /// As [`Client::define_index`]; `Server` if the leader cannot load the model.
    pub async fn define_index_with(&self, req: pb::DefineIndexRequest) -> Result<u64, ClientError> {
        let mut index = 0;
        for shard in self.shards().await? {
            let resp = self
                .call_in(
                    shard.group,
                    Kind::Write,
                    || req.clone(),
                    |mut c, r| async move { c.define_index(r).await },
                )
                .await?;
            index = resp.index;
        }
        Ok(index)
    }

    /// The `k` values of index `index` nearest to `vector`, nearest first, read
    /// linearizably (the index holds every write acknowledged before the call).
    ///
    /// # Errors
    /// See [`ClientError`]; `Server` for an index that does not exist.
    pub async fn search(
        &self,
        index: &str,
        vector: &[f32],
        k: u32,
    ) -> Result<Vec<pb::SearchHit>, ClientError> {
        self.search_with(pb::SearchRequest {
            index: index.to_owned(),
            vector: vector.to_vec(),
            k,
            ..Default::default()
        })
        .await
    }

    /// The `k` values of index `index` (one with a model) nearest in meaning to `text`.
    ///
    /// # Errors
    /// As [`Client::search`]; `Refused` for an index without a model.
    pub async fn search_text(
        &self,
        index: &str,
        text: &str,
        k: u32,
    ) -> Result<Vec<pb::SearchHit>, ClientError> {
        self.search_by_text(index, text, k, pb::SearchMode::Meaning)
            .await
    }

    /// The `k` values of index `index` that best match `text` by keywords (BM25), read
    /// linearizably: exact and current at every acknowledged write.
    ///
    /// # Errors
    /// As [`Client::search`]; `Server` for an index defined without keywords.
    pub async fn search_keywords(
        &self,
        index: &str,
        text: &str,
        k: u32,
    ) -> Result<Vec<pb::SearchHit>, ClientError> {
        self.search_by_text(index, text, k, pb::SearchMode::Keywords)
            .await
    }

    /// The `k` values of index `index` that best match `text` by keywords and by meaning
    /// (its model embeds `text`), the two rankings fused by reciprocal rank.
    ///
    /// # Errors
    /// As [`Client::search_keywords`]; `Refused` for an index without a model.
    pub async fn search_hybrid(
        &self,
        index: &str,
        text: &str,
        k: u32,
    ) -> Result<Vec<pb::SearchHit>, ClientError> {
        self.search_by_text(index, text, k, pb::SearchMode::Hybrid)
            .await
    }

    async fn search_by_text(
        &self,
        index: &str,
        text: &str,
        k: u32,
        mode: pb::SearchMode,
    ) -> Result<Vec<pb::SearchHit>, ClientError> {
        self.search_with(pb::SearchRequest {
            index: index.to_owned(),
            text: Some(text.to_owned()),
            k,
            mode: mode.into(),
            ..Default::default()
        })
        .await
    }

    /// [`Client::search`] with every option of the request (`ef`, `exact`, a key range,
    /// the mode, keyword matching and fusion).
    ///
    /// # Errors
    /// As [`Client::search`].
    pub async fn search_with(
        &self,
        req: pb::SearchRequest,
    ) -> Result<Vec<pb::SearchHit>, ClientError> {
        let resp = self
            .call(
                Kind::Read,
                || req.clone(),
                |mut c, r| async move { c.search(r).await },
            )
            .await?;
        Ok(resp.hits)
    }
}
