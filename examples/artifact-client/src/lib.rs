//! A small NIP-AR client over the HTTP bridge (NIP-98 signed `POST /events` and
//! `POST /query`): what a newcomer needs to create, edit, move, delete and restore an
//! artifact and to list current state. Every write names the revision it replaces
//! (`prev`); a lost race answers [`Outcome::Conflict`], and the client then fetches the
//! current revision and reconciles instead of blindly resubmitting.

use anyhow::{bail, Context};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use buzz_nostr::nip98::authorization_header;
use serde_json::{json, Value};

/// The envelope tags a client never copies as client data.
const ENVELOPE: [&str; 8] = ["ar", "d", "h", "type", "title", "op", "root", "prev"];

/// How the relay answered a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Accepted,
    /// Someone else's revision won (HTTP 409): reconcile with the current one.
    Conflict(String),
    Refused(String),
}

/// One signed-in user of one relay.
pub struct ArtifactClient {
    base: String,
    keys: Keys,
    http: reqwest::Client,
}

impl ArtifactClient {
    /// `base`: `http(s)://host[:port]` exactly as the relay is addressed (NIP-98 signs it).
    pub fn new(base: &str, keys: Keys) -> ArtifactClient {
        ArtifactClient {
            base: base.trim_end_matches('/').to_owned(),
            keys,
            http: reqwest::Client::new(),
        }
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    async fn post(&self, path: &str, body: Vec<u8>) -> anyhow::Result<(u16, Value)> {
        let url = format!("{}{path}", self.base);
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let auth = authorization_header(&self.keys, "POST", &url, Some(&body), now(), Some(&nonce));
        let answer = self
            .http
            .post(&url)
            .header("authorization", auth)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .with_context(|| format!("POST {url}"))?;
        let status = answer.status().as_u16();
        let body = answer.json().await.context("answer body")?;
        Ok((status, body))
    }

    /// Publish one signed event.
    pub async fn publish(&self, event: &Event) -> anyhow::Result<Outcome> {
        let (status, body) = self.post("/events", serde_json::to_vec(event)?).await?;
        let message = body["message"].as_str().unwrap_or("").to_owned();
        Ok(match (status, body["accepted"].as_bool()) {
            (200, Some(true)) => Outcome::Accepted,
            (409, _) => Outcome::Conflict(message),
            _ => Outcome::Refused(message),
        })
    }

    /// Run artifact query filters; the events answered.
    pub async fn query(&self, filters: Value) -> anyhow::Result<Vec<Event>> {
        let (status, body) = self.post("/query", serde_json::to_vec(&filters)?).await?;
        if status != 200 {
            bail!("query refused ({status}): {}", body["error"]);
        }
        Ok(serde_json::from_value(body)?)
    }

    /// Create a channel (kind 9007, open) named `name`; returns its id.
    pub async fn create_channel(&self, name: &str) -> anyhow::Result<String> {
        let id = uuid::Uuid::new_v4().to_string();
        let event = self
            .keys
            .sign(9007, vec![tag("h", &id), tag("name", name)], "", now());
        match self.publish(&event).await? {
            Outcome::Accepted => Ok(id),
            other => bail!("channel not created: {other:?}"),
        }
    }

    /// A create revision (not published): a fresh `d`, `extra` client tags.
    pub fn create(
        &self,
        channel: &str,
        artifact_type: &str,
        title: &str,
        extra: &[(&str, &str)],
        content: &Value,
    ) -> Event {
        let d = uuid::Uuid::new_v4().to_string();
        let mut tags = vec![
            tag("ar", "1"),
            tag("d", &d),
            tag("h", channel),
            tag("type", artifact_type),
            tag("title", title),
            tag("op", "create"),
        ];
        tags.extend(extra.iter().map(|(n, v)| tag(n, v)));
        self.keys.sign(45_010, tags, &content.to_string(), now())
    }

    /// The next revision after `current` (not published): `op`, the new home for a
    /// move, and the new snapshot. Unfamiliar client tags are preserved; a delete
    /// carries only the envelope.
    pub fn next(
        &self,
        current: &Event,
        op: &str,
        home: Option<&str>,
        title: Option<&str>,
        content: &Value,
    ) -> Event {
        let get = |n: &str| current.tag_value(n).unwrap_or_default().to_owned();
        let mut tags = vec![
            tag("ar", "1"),
            tag("d", &get("d")),
            tag("h", home.unwrap_or(&get("h"))),
            tag("type", &get("type")),
        ];
        if op != "delete" {
            let old = current.tag_value("title").unwrap_or("untitled").to_owned();
            tags.push(tag("title", title.unwrap_or(&old)));
        }
        tags.push(tag("op", op));
        // A move's root must be in the destination; this client drops it.
        if let Some(root) = current.tag_value("root").filter(|_| op != "move") {
            tags.push(tag("root", root));
        }
        tags.push(tag("prev", &current.id));
        let mut body = content.to_string();
        if op == "delete" {
            body.clear();
        } else {
            tags.extend(
                current
                    .tags
                    .iter()
                    .filter(|t| !t.is_empty() && !ENVELOPE.contains(&t[0].as_str()))
                    .cloned(),
            );
        }
        self.keys.sign(45_010, tags, &body, now())
    }

    /// A restore after `deletion` (not published): the deletion's envelope, and the
    /// title and client tags of `snapshot` (the last revision before the deletion, say),
    /// so the restored state is complete.
    pub fn restore(&self, deletion: &Event, snapshot: &Event, content: &Value) -> Event {
        let mut event = self.next(snapshot, "restore", None, None, content);
        // Envelope from the deletion: its h, root and id as prev.
        let mut tags: Vec<Vec<String>> = event
            .tags
            .drain(..)
            .filter(|t| !matches!(t[0].as_str(), "h" | "root" | "prev"))
            .collect();
        tags.push(tag("h", deletion.tag_value("h").unwrap_or_default()));
        if let Some(root) = deletion.tag_value("root") {
            tags.push(tag("root", root));
        }
        tags.push(tag("prev", &deletion.id));
        self.keys.sign(45_010, tags, &content.to_string(), now())
    }

    /// The current revision of `d` (none when deleted, retired or unreadable).
    pub async fn current_of(&self, d: &str) -> anyhow::Result<Option<Event>> {
        Ok(self
            .query(json!([{"artifact": "current", "#d": [d]}]))
            .await?
            .pop())
    }

    /// Every current artifact matching `predicates` (`#name` → values), all pages.
    pub async fn list_current(&self, predicates: Value) -> anyhow::Result<Vec<Event>> {
        let mut all = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let mut filter = predicates.clone();
            filter["artifact"] = json!("current");
            if let Some(d) = &after {
                filter["after"] = json!(d);
            }
            let page = self.query(json!([filter])).await?;
            let Some(last) = page.last() else {
                return Ok(all);
            };
            after = last.tag_value("d").map(str::to_owned);
            all.extend(page);
        }
    }
}

fn tag(name: &str, value: &str) -> Vec<String> {
    vec![name.to_owned(), value.to_owned()]
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// What a full NIP-AR capture gave: the verified current revisions and whether the relay
/// confirmed completion (only then may local records absent from it be dropped).
#[derive(Debug)]
pub struct Synced {
    pub bodies: Vec<Event>,
    pub pages: usize,
    pub complete: bool,
}

impl ArtifactClient {
    /// One snapshot request; the answer object, or the spec's error code.
    async fn snapshot(&self, filter: Value) -> anyhow::Result<Value> {
        let (status, body) = self.post("/query", serde_json::to_vec(&[filter])?).await?;
        if status != 200 {
            bail!("snapshot refused ({status}): {}", body["code"]);
        }
        Ok(body)
    }

    /// Sync "every current artifact matching `query`" with the stable manifest transport:
    /// start, every page, the bodies (each signature and its artifact, channel and
    /// revision checked against the manifest), then complete. Any failure is an error:
    /// nothing here may be treated as complete unless `complete` is true.
    pub async fn sync(&self, query: Value) -> anyhow::Result<Synced> {
        let first = self
            .snapshot(
                serde_json::json!({"artifact": "snapshot", "action": "start", "query": query}),
            )
            .await?;
        let token = first["token"].as_str().context("token")?.to_owned();
        let mut entries: Vec<Value> = first["entries"].as_array().cloned().unwrap_or_default();
        let mut next = first["nextToken"].clone();
        let mut pages = 1;
        while let Some(cursor) = next.as_str() {
            let page = self
                .snapshot(serde_json::json!({"artifact": "snapshot", "action": "page", "token": token, "cursor": cursor}))
                .await?;
            entries.extend(page["entries"].as_array().cloned().unwrap_or_default());
            next = page["nextToken"].clone();
            pages += 1;
        }
        let mut bodies = Vec::with_capacity(entries.len());
        for chunk in entries.chunks(100) {
            let ids: Vec<&str> = chunk
                .iter()
                .filter_map(|e| e["revisionId"].as_str())
                .collect();
            let answer = self
                .snapshot(serde_json::json!({"artifact": "snapshot", "action": "bodies", "token": token, "revisionIds": ids}))
                .await?;
            let events: Vec<Event> = serde_json::from_value(answer["events"].clone())?;
            if events.len() != chunk.len() {
                bail!(
                    "bodies answered {} events for {} ids",
                    events.len(),
                    chunk.len()
                );
            }
            for (event, entry) in events.iter().zip(chunk) {
                buzz_nostr::event::verify_signature(event)
                    .map_err(|e| anyhow::anyhow!("body {}: {e}", event.id))?;
                let matches = Some(event.id.as_str()) == entry["revisionId"].as_str()
                    && event.tag_value("d") == entry["artifactId"].as_str()
                    && event.tag_value("h") == entry["channelId"].as_str();
                if !matches {
                    bail!(
                        "body {} does not match its manifest entry {entry}",
                        event.id
                    );
                }
            }
            bodies.extend(events);
        }
        let done = self
            .snapshot(
                serde_json::json!({"artifact": "snapshot", "action": "complete", "token": token}),
            )
            .await?;
        Ok(Synced {
            bodies,
            pages,
            complete: done["complete"] == Value::Bool(true),
        })
    }
}
