//! `mentions`: messages with ~2,000 p tags.

use super::*;

use crate::cpu::with_cpu;

/// Send `events` one at a time; each EVENT->OK.
pub(crate) async fn one_by_one(
    ws: &mut WsClient,
    events: &[Event],
) -> anyhow::Result<Vec<Duration>> {
    let mut took = Vec::new();
    for event in events {
        let began = Instant::now();
        let (ok, msg) = ws.publish(event).await;
        if !ok {
            bail!("refused: {msg}");
        }
        took.push(began.elapsed());
    }
    Ok(took)
}

pub(crate) async fn mentions_case(args: &Args, rt: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    let bench = Bench::start(args, rt, !args.without_plugin).await?;
    let (owner, attacker, other) = (Keys::generate(), Keys::generate(), Keys::generate());
    let mut ows = bench.user(&owner).await?;
    let mut aws = bench.user(&attacker).await?;
    let mut xws = bench.user(&other).await?;
    let ch = create_channel(&mut ows, &owner, "general").await?;
    join(&mut aws, &attacker, &ch).await?;
    join(&mut xws, &other, &ch).await?;
    // Channel members the owner adds (9000), to be p-tagged in the second variant.
    let members: Vec<Keys> = (0..args.p_tags).map(|_| Keys::generate()).collect();
    let adds = sign_all(
        members
            .iter()
            .map(|m| {
                let tags = vec![tag(&["h", &ch]), tag(&["p", m.pubkey()])];
                (owner.clone(), 9000, tags, now())
            })
            .collect(),
    );
    flood(&mut ows, &adds, 200).await?;
    // Connections idle through a long setup may have missed heartbeats: connect afresh.
    aws.close().await;
    xws.close().await;
    let mut aws = bench.user(&attacker).await?;
    let mut xws = bench.user(&other).await?;
    println!(
        "{}: mentions: {} members added; messages of {} p tags; read-state plugin {}",
        bench.backend,
        args.p_tags,
        args.p_tags,
        if args.without_plugin { "off" } else { "on" }
    );
    let strangers: Vec<String> = (0..args.p_tags)
        .map(|_| Keys::generate().pubkey().to_owned())
        .collect();
    let member_pks: Vec<String> = members.iter().map(|m| m.pubkey().to_owned()).collect();
    let tagged = |pks: &[String], n: usize| {
        sign_all(
            (0..n)
                .map(|_| {
                    let mut tags = vec![tag(&["h", &ch])];
                    tags.extend(pks.iter().map(|p| tag(&["p", p])));
                    (attacker.clone(), 9, tags, now())
                })
                .collect(),
        )
    };
    let plain = |keys: &Keys, n: usize| {
        sign_all(
            (0..n)
                .map(|_| (keys.clone(), 9, vec![tag(&["h", &ch])], now()))
                .collect(),
        )
    };

    // Plain messages first: the reference cost.
    let events = plain(&attacker, args.mention_events * 5);
    let (took, cpu, pg) = with_cpu(one_by_one(&mut aws, &events)).await?;
    report_events("plain message", &took, cpu, pg, bench.backend, None);

    for (label, pks) in [
        ("p tags naming non-members", &strangers),
        ("p tags naming channel members", &member_pks),
    ] {
        let events = tagged(pks, args.mention_events);
        let rows0 = bench.plugin_rows()?;
        let (took, cpu, pg) = with_cpu(one_by_one(&mut aws, &events)).await?;
        let rows1 = bench.plugin_rows()?;
        let rows = (rows1.0 - rows0.0 + rows1.1 - rows0.1) as f64 / events.len() as f64;
        report_events(label, &took, cpu, pg, bench.backend, Some(rows));
    }

    // Another connection's EVENT->OK, alone and while the attacker floods.
    let alone = timed_phase(&mut xws, &other, &ch, args.phase_secs).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let flooding = {
        let stop = stop.clone();
        // Signed beforehand: the client's signing must not slow the other connection.
        let events = tagged(&member_pks, args.flood_events);
        tokio::spawn(async move {
            let mut sent = 0usize;
            for chunk in events.chunks(4) {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                sent += aws.burst(chunk).await.len();
            }
            let ran_out = !stop.load(Ordering::SeqCst);
            (aws, sent, ran_out)
        })
    };
    let during = timed_phase(&mut xws, &other, &ch, args.phase_secs).await?;
    stop.store(true, Ordering::SeqCst);
    let (aws, sent, ran_out) = flooding.await?;
    if ran_out {
        println!("  (the flood ran out of messages before the phase ended: raise --flood-events)");
    }
    println!(
        "  other connection EVENT->OK: alone p50 {:.1} ms p99 {:.1} ms; while one connection sends {}-p-tag messages ({sent} sent) p50 {:.1} ms p99 {:.1} ms",
        ms(percentile(&alone, 50)),
        ms(percentile(&alone, 99)),
        args.p_tags,
        ms(percentile(&during, 50)),
        ms(percentile(&during, 99)),
    );
    for ws in [ows, aws, xws] {
        ws.close().await;
    }
    bench.stop(rt).await
}

pub(crate) fn report_events(
    label: &str,
    took: &[Duration],
    cpu_ms: f64,
    pg_ms: f64,
    backend: &str,
    rows: Option<f64>,
) {
    let mut sorted = took.to_vec();
    sorted.sort();
    let n = took.len().max(1) as f64;
    let pg = if backend == "postgres" {
        format!("  postgres CPU {:.2} ms/msg", pg_ms / n)
    } else {
        String::new()
    };
    let rows = rows.map_or(String::new(), |r| format!("  {r:.0} read-state rows/msg"));
    println!(
        "  {label}: {} msgs, relay CPU {:.2} ms/msg{pg}  EVENT->OK p50 {:.1} ms p99 {:.1} ms{rows}",
        took.len(),
        cpu_ms / n,
        ms(percentile(&sorted, 50)),
        ms(percentile(&sorted, 99)),
    );
}

/// Plain messages one at a time for `secs`: each EVENT->OK, sorted.
pub(crate) async fn timed_phase(
    ws: &mut WsClient,
    keys: &Keys,
    channel: &str,
    secs: u64,
) -> anyhow::Result<Vec<Duration>> {
    let end = Instant::now() + Duration::from_secs(secs);
    let mut took = Vec::new();
    while Instant::now() < end {
        let event = keys.sign(
            9,
            vec![tag(&["h", channel])],
            &uuid::Uuid::new_v4().to_string(),
            now(),
        );
        let began = Instant::now();
        let (ok, msg) = ws.publish(&event).await;
        if !ok {
            bail!("refused: {msg}");
        }
        took.push(began.elapsed());
    }
    took.sort();
    Ok(took)
}
