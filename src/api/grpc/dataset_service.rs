//! `memgym.v1.Dataset`: read-only views of the LoCoMo data the server loaded. Refusals are
//! [`EpisodeError`]s, so they reach the client through the one error → `Status` map (`status.rs`).

use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::api::grpc::convert::{page_size, split_in, split_out};
use crate::api::grpc::page;
use crate::api::pb;
use crate::api::pb::dataset_server::Dataset as DatasetApi;
use crate::episode::{Environment, EpisodeError};

/// The Dataset service.
#[derive(Debug, Clone)]
pub struct DatasetService {
    env: Arc<Environment>,
}

impl DatasetService {
    /// Serves the environment's dataset.
    pub fn new(env: Arc<Environment>) -> Self {
        DatasetService { env }
    }
}

#[tonic::async_trait]
impl DatasetApi for DatasetService {
    async fn list_conversations(
        &self,
        _r: Request<pb::ListConversationsRequest>,
    ) -> Result<Response<pb::ListConversationsResponse>, Status> {
        let ds = self.env.dataset();
        let conversations = ds
            .conversations
            .iter()
            .map(|c| pb::ConversationInfo {
                conversation_id: c.id.clone(),
                speaker_a: c.speaker_a.clone(),
                speaker_b: c.speaker_b.clone(),
                session_count: c.sessions.len() as u32,
                turn_count: c.turn_count,
                memory_count: ds.memories_of(&c.id).len() as u32,
                question_count: ds.questions.iter().filter(|q| q.conversation_id == c.id).count() as u32,
                split: split_out(c.split) as i32,
            })
            .collect();
        Ok(Response::new(pb::ListConversationsResponse { conversations }))
    }

    async fn list_questions(&self, r: Request<pb::ListQuestionsRequest>) -> Result<Response<pb::ListQuestionsResponse>, Status> {
        let pb::ListQuestionsRequest { conversation_id, split: split_raw, category, page_size: size, page_token } = r.into_inner();
        let ds = self.env.dataset();
        let split = split_in(split_raw)?;
        if category > 5 {
            return Err(EpisodeError::invalid("category", format!("must be 0 (all) or 1 to 5, got {category}")).into());
        }
        let conv = conversation_id.trim();
        if !conv.is_empty() && ds.conversation(conv).is_none() {
            return Err(EpisodeError::DatasetNotFound { what: "conversation", id: conv.to_string() }.into());
        }
        let size = page_size(size, 100, 1000)?;
        let key = page::listing_key(page::Rpc::Questions, &[conv, &split_raw.to_string(), &category.to_string()]);
        let offset = page::decode(page::Rpc::Questions, key, &page_token)?.unwrap_or(0);
        let offset = usize::try_from(offset).unwrap_or(usize::MAX);
        let matching: Vec<&crate::dataset::Question> = ds
            .questions
            .iter()
            .filter(|q| conv.is_empty() || q.conversation_id == conv)
            .filter(|q| split.is_none_or(|s| q.split == s))
            .filter(|q| category == 0 || u32::from(q.category) == category)
            .collect();
        let total = matching.len();
        if offset > total {
            return Err(EpisodeError::invalid("page_token", "past the end of this listing").into());
        }
        let page: Vec<pb::QuestionRecord> = matching.iter().skip(offset).take(size).map(|q| (*q).into()).collect();
        let end = offset + page.len();
        Ok(Response::new(pb::ListQuestionsResponse {
            questions: page,
            next_page_token: if end < total { page::encode(page::Rpc::Questions, key, end as u64) } else { String::new() },
            total: total as u32,
        }))
    }
}
