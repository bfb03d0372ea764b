//! `threads` and `victims`: sidebar rows under thread floods.

use super::*;

pub(crate) async fn threads_case(
    args: &Args,
    rt: &tokio::runtime::Runtime,
    k: usize,
) -> anyhow::Result<()> {
    let bench = Bench::start(args, rt, true).await?;
    let (owner, victim, attacker) = (Keys::generate(), Keys::generate(), Keys::generate());
    let mut ows = bench.user(&owner).await?;
    let mut vws = bench.user(&victim).await?;
    let mut aws = bench.user(&attacker).await?;
    let ch = create_channel(&mut ows, &owner, "general").await?;
    join(&mut vws, &victim, &ch).await?;
    join(&mut aws, &attacker, &ch).await?;
    let api = bench.api(&victim);
    start_account(&mut vws, &api, &victim, &ch).await?;
    let began = Instant::now();
    let victim_pk = vec![victim.pubkey().to_owned()];
    attacker_threads(&mut aws, &attacker, &ch, k, &victim_pk, &[]).await?;
    println!(
        "{}: threads: {k} attacker threads (root p-tags the victim, one reply each) in {:.1} s",
        bench.backend,
        began.elapsed().as_secs_f64()
    );
    let path = format!("/buzz/v1/me/sidebar?channel_ids={ch}");
    for _ in 0..3 {
        timed_row(&api, &path).await?;
    }
    let mut took = Vec::new();
    let mut last = None;
    for _ in 0..args.iterations {
        let (t, status, bytes, body) = timed_row(&api, &path).await?;
        took.push(t);
        last = Some((status, bytes, body));
    }
    took.sort();
    let (status, bytes, body) = last.context("no request")?;
    let row = &body["channels"][0];
    let listed = row["threads"].as_array().map_or(0, Vec::len);
    println!(
        "  sidebar row: p50 {:.1} ms  p99 {:.1} ms  status {status}  {bytes} bytes  {listed} threads listed{}",
        ms(percentile(&took, 50)),
        ms(percentile(&took, 99)),
        if status == 200 {
            String::new()
        } else {
            format!("  ({})", body["error"]["message"])
        }
    );
    // Paging through every thread, when rows carry a cursor.
    if let Some(mut cursor) = row["threads_next_cursor"].as_str().map(str::to_owned) {
        let began = Instant::now();
        let (mut pages, mut seen) = (1usize, listed);
        loop {
            let next = format!(
                "{path}&threads_cursor={}",
                buzz_read_state_client::encode(&cursor)
            );
            let (_, status, _, body) = timed_row(&api, &next).await?;
            if status != 200 {
                bail!("threads page: {status} {body}");
            }
            pages += 1;
            let row = &body["channels"][0];
            seen += row["threads"].as_array().map_or(0, Vec::len);
            match row["threads_next_cursor"].as_str() {
                Some(c) => cursor = c.to_owned(),
                None => break,
            }
        }
        println!(
            "  paging every thread: {seen} threads in {pages} pages, {:.0} ms in all ({:.1} ms a page)",
            ms(began.elapsed()),
            ms(began.elapsed()) / (pages - 1).max(1) as f64
        );
    }
    for ws in [ows, vws, aws] {
        ws.close().await;
    }
    bench.stop(rt).await
}

pub(crate) async fn victims_case(args: &Args, rt: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    const VICTIMS: usize = 20;
    let bench = Bench::start(args, rt, true).await?;
    let (owner, attacker, bystander) = (Keys::generate(), Keys::generate(), Keys::generate());
    let victims: Vec<Keys> = (0..VICTIMS).map(|_| Keys::generate()).collect();
    let mut ows = bench.user(&owner).await?;
    let mut aws = bench.user(&attacker).await?;
    let mut bws = bench.user(&bystander).await?;
    let ch = create_channel(&mut ows, &owner, "general").await?;
    let other = create_channel(&mut ows, &owner, "elsewhere").await?;
    join(&mut aws, &attacker, &ch).await?;
    join(&mut bws, &bystander, &other).await?;
    for _ in 0..20 {
        publish(
            &mut ows,
            owner.sign(9, vec![tag(&["h", &other])], "hello", now()),
        )
        .await?;
    }
    let mut apis = Vec::new();
    for v in &victims {
        let mut ws = bench.user(v).await?;
        join(&mut ws, v, &ch).await?;
        let api = bench.api(v);
        start_account(&mut ws, &api, v, &ch).await?;
        ws.close().await;
        apis.push(api);
    }
    let path = format!("/buzz/v1/me/sidebar?channel_ids={ch}");
    let before = victims_load(args, &bench, &apis, &path, &bystander, &other).await?;
    let began = Instant::now();
    let pks: Vec<String> = victims.iter().map(|v| v.pubkey().to_owned()).collect();
    attacker_threads(&mut aws, &attacker, &ch, args.victim_threads, &[], &pks).await?;
    println!(
        "{}: victims: {} attacker threads, each reply p-tags {VICTIMS} victims, in {:.1} s",
        bench.backend,
        args.victim_threads,
        began.elapsed().as_secs_f64()
    );
    let after = victims_load(args, &bench, &apis, &path, &bystander, &other).await?;
    let refused = |load: &Load| {
        if load.refused.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = load
                .refused
                .iter()
                .map(|(status, n)| format!("{n} x {status}"))
                .collect();
            format!(" (not 200: {})", list.join(", "))
        }
    };
    println!(
        "  victims' sidebar p50: {:.1} ms before the flood{}, {:.1} ms after{}",
        ms(before.sidebar_p50),
        refused(&before),
        ms(after.sidebar_p50),
        refused(&after)
    );
    println!(
        "  unrelated REQ p50 while they load: {:.1} ms before the flood, {:.1} ms after",
        ms(before.req_p50),
        ms(after.req_p50)
    );
    for ws in [ows, aws, bws] {
        ws.close().await;
    }
    bench.stop(rt).await
}

/// Every victim loads its sidebar `iterations` times (at most 20), all at once, while
/// the bystander sends REQs one after another from a thread and runtime of its own (so
/// the victims' client work never delays it).
pub(crate) struct Load {
    /// Victims' sidebar requests, every status.
    pub(crate) sidebar_p50: Duration,
    /// Answers other than 200, by status.
    pub(crate) refused: Vec<(u16, usize)>,
    pub(crate) req_p50: Duration,
}

pub(crate) async fn victims_load(
    args: &Args,
    bench: &Bench,
    apis: &[Client],
    path: &str,
    bystander: &Keys,
    other: &str,
) -> anyhow::Result<Load> {
    let stop = Arc::new(AtomicBool::new(false));
    let requests = {
        let (stop, keys, other) = (stop.clone(), bystander.clone(), other.to_owned());
        let (addr, host) = (bench.addr(), bench.host.clone());
        std::thread::Builder::new()
            .name("bench-client-req".into())
            .spawn(move || -> anyhow::Result<Vec<Duration>> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                rt.block_on(async move {
                    let mut ws = WsClient::connect(addr, &host).await?;
                    if !ws.auth(&keys).await.0 {
                        bail!("bystander AUTH refused");
                    }
                    let mut took = Vec::new();
                    let mut n = 0u64;
                    while !stop.load(Ordering::SeqCst) {
                        n += 1;
                        let filter = json!({"kinds": [9], "#h": [other], "limit": 20});
                        let began = Instant::now();
                        ws.req(&format!("r{n}"), vec![filter])
                            .await
                            .map_err(|e| anyhow::anyhow!("REQ: {e}"))?;
                        took.push(began.elapsed());
                        ws.send(&json!(["CLOSE", format!("r{n}")])).await?;
                    }
                    ws.close().await;
                    Ok(took)
                })
            })?
    };
    let mut tasks = Vec::new();
    for api in apis {
        let (api, path, n) = (api.clone(), path.to_owned(), args.iterations.min(20));
        tasks.push(tokio::spawn(async move {
            let mut took = Vec::new();
            for _ in 0..n {
                let (t, status, _, _) = timed_row(&api, &path).await?;
                took.push((t, status));
            }
            Ok::<_, anyhow::Error>(took)
        }));
    }
    let mut victims = Vec::new();
    for task in tasks {
        victims.extend(task.await??);
    }
    stop.store(true, Ordering::SeqCst);
    let mut reqs = tokio::task::spawn_blocking(move || requests.join())
        .await?
        .map_err(|_| anyhow::anyhow!("bystander thread panicked"))??;
    let mut refused: Vec<(u16, usize)> = Vec::new();
    for (_, status) in victims.iter().filter(|(_, s)| *s != 200) {
        match refused.iter_mut().find(|(s, _)| s == status) {
            Some((_, count)) => *count += 1,
            None => refused.push((*status, 1)),
        }
    }
    let mut took: Vec<Duration> = victims.iter().map(|(t, _)| *t).collect();
    took.sort();
    reqs.sort();
    Ok(Load {
        sidebar_p50: percentile(&took, 50),
        refused,
        req_p50: percentile(&reqs, 50),
    })
}
