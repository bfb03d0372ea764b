//! The plugin's HTTP routes, served through core's plain route surface: core resolves
//! the community (unknown host: 404), reads the body and verifies NIP-98 where asked.

use crate::{counts, Hello, RESET_PATH, STATS_PATH};
use buzz_core::error::Reason;
use buzz_core::plugin::{
    PluginRequest, PluginResponse, Route, RouteAuth, RouteBody, RouteHandler, RouteMethod,
};
use serde_json::json;
use std::sync::Arc;

pub(crate) fn routes(hello: Arc<Hello>) -> Vec<Route> {
    vec![
        Route {
            method: RouteMethod::Get,
            path: STATS_PATH.into(),
            auth: RouteAuth::Public,
            body: RouteBody::Whole,
            handler: Arc::new(Stats(hello.clone())),
        },
        Route {
            method: RouteMethod::Post,
            path: RESET_PATH.into(),
            auth: RouteAuth::Nip98,
            body: RouteBody::Whole,
            handler: Arc::new(Reset(hello)),
        },
    ]
}

/// `GET /hello/stats`: the counts of the community the `Host` header selects.
struct Stats(Arc<Hello>);

#[async_trait::async_trait]
impl RouteHandler for Stats {
    async fn handle(&self, request: PluginRequest) -> Result<PluginResponse, Reason> {
        let counts = self.0.counts(request.ctx.community_id()).await?;
        Ok(PluginResponse::json(200, &json!(counts)))
    }
}

/// `POST /hello/reset`: a community owner forgets the community's counts.
struct Reset(Arc<Hello>);

#[async_trait::async_trait]
impl RouteHandler for Reset {
    async fn handle(&self, request: PluginRequest) -> Result<PluginResponse, Reason> {
        let caller = request.ctx.pubkey.as_deref().unwrap_or_default();
        if !request.ctx.community.owners.iter().any(|o| o == caller) {
            return Err(Reason::Restricted("only community owners may reset".into()));
        }
        let community_id = request.ctx.community_id();
        self.0
            .store()
            .write(move |conn| counts::reset(conn, community_id))
            .await?;
        Ok(PluginResponse::json(200, &json!({ "reset": true })))
    }
}
