//! One Redis command connection with a deadline on every operation.
//!
//! Why not `redis::aio::ConnectionManager` alone: it has no deadline by default, and a
//! response timeout does not make it reconnect (only I/O errors do), so a Redis that
//! stops answering without closing the socket (a stalled proxy, a lost host) left every
//! request that needed it waiting for minutes, and kept waiting after Redis came back.
//!
//! Here each operation (connecting included) must finish within `deadline`; a timeout or
//! a connection error drops the connection, so the next operation opens a fresh one:
//! the link recovers by itself once Redis answers again. Failures become
//! [`Reason::Unavailable`] (a retryable `error:` / 503), never a hang.

use crate::error::Reason;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, FromRedisValue};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

pub struct RedisLink {
    client: Client,
    deadline: Duration,
    /// The current connection and its generation (so a failure only drops the
    /// connection it happened on, not a fresh one another request opened meanwhile).
    slot: Mutex<(u64, Option<MultiplexedConnection>)>,
    /// Whether the last operation succeeded. Lets callers skip a probe when all is well.
    healthy: AtomicBool,
}

impl RedisLink {
    /// Connect once, within `deadline`. The error says why (e.g. connection refused)
    /// rather than only that no answer came.
    pub async fn connect(client: Client, deadline: Duration) -> anyhow::Result<RedisLink> {
        let link = RedisLink {
            client,
            deadline,
            slot: Mutex::new((0, None)),
            healthy: AtomicBool::new(false),
        };
        let probe = async {
            let (_, mut conn) = link.connection().await?;
            redis::cmd("PING").query_async::<String>(&mut conn).await
        };
        match tokio::time::timeout(deadline, probe).await {
            Ok(Ok(_)) => {}
            // The connection's own timeouts (same deadline) may fire first: same meaning.
            Ok(Err(e)) if e.is_timeout() => anyhow::bail!("no answer within {deadline:?}"),
            Ok(Err(e)) => return Err(anyhow::Error::new(e)),
            Err(_) => anyhow::bail!("no answer within {deadline:?}"),
        }
        link.healthy.store(true, Ordering::Relaxed);
        Ok(link)
    }

    /// The deadline of one operation.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The client, for connections of another shape (pub/sub).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// `true` when the last operation succeeded.
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Run `cmd` within the deadline. `what` names the operation for logs and for the
    /// client's `error:` text (e.g. "authentication store").
    pub async fn run<T: FromRedisValue>(&self, what: &str, cmd: &redis::Cmd) -> Result<T, Reason> {
        let mut generation = None;
        let attempt = async {
            let (g, mut conn) = self.connection().await?;
            generation = Some(g);
            cmd.query_async::<T>(&mut conn).await
        };
        let outcome = tokio::time::timeout(self.deadline, attempt).await;
        let error = match outcome {
            Ok(Ok(value)) => {
                self.healthy.store(true, Ordering::Relaxed);
                return Ok(value);
            }
            // Redis answered, with an error about the command: the link is fine.
            Ok(Err(e)) if e.kind() == redis::ErrorKind::ResponseError => {
                self.healthy.store(true, Ordering::Relaxed);
                return Err(Reason::Internal(
                    anyhow::Error::new(e).context(what.to_owned()),
                ));
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {:?}", self.deadline),
        };
        self.healthy.store(false, Ordering::Relaxed);
        self.drop_connection(generation);
        tracing::warn!(%error, operation = what, "redis unavailable; refusing (fail closed)");
        Err(Reason::Unavailable(format!(
            "{what} unavailable, try again"
        )))
    }

    /// The current connection, or a new one (not bounded here: callers bound it).
    async fn connection(&self) -> redis::RedisResult<(u64, MultiplexedConnection)> {
        let generation = {
            let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(conn) = &slot.1 {
                return Ok((slot.0, conn.clone()));
            }
            slot.0
        };
        // Timeouts inside the connection too, so its driver never waits forever either.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(self.deadline)
            .set_response_timeout(self.deadline);
        let conn = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if slot.0 == generation && slot.1.is_none() {
            slot.1 = Some(conn.clone());
        }
        Ok((generation, conn))
    }

    /// Forget the connection of `generation` (if still current): the next operation
    /// reconnects instead of queueing behind a socket that stopped answering.
    fn drop_connection(&self, generation: Option<u64>) {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if generation.is_none_or(|g| g == slot.0) {
            slot.0 += 1;
            slot.1 = None;
        }
    }
}
