//! `plans`: PostgreSQL ingest with autovacuum off.

use super::*;

#[derive(QueryableByName)]
pub(crate) struct TableStat {
    #[diesel(sql_type = diesel::sql_types::Text)]
    relname: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    seq_scan: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    seq_tup_read: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    idx_scan: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    idx_tup_fetch: i64,
}

#[derive(QueryableByName)]
pub(crate) struct IndexStat {
    #[diesel(sql_type = diesel::sql_types::Text)]
    indexrelname: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    idx_scan: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    idx_tup_read: i64,
}

pub(crate) async fn plans_case(args: &Args, rt: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    if args.database_url.is_none() {
        bail!("--case plans needs --database-url (PostgreSQL)");
    }
    // Migrations run at start; autovacuum is switched off right after, before the first
    // message, so every statement is planned on empty, never-analyzed tables.
    let bench = Bench::start(args, rt, !args.without_plugin).await?;
    let mut pg = diesel::PgConnection::establish(&bench.database_url)?;
    #[derive(QueryableByName)]
    struct Name {
        #[diesel(sql_type = diesel::sql_types::Text)]
        relname: String,
    }
    let tables: Vec<Name> = diesel::sql_query(
        "SELECT relname::TEXT AS relname FROM pg_stat_user_tables WHERE schemaname = 'public'",
    )
    .load(&mut pg)?;
    for t in &tables {
        diesel::sql_query(format!(
            "ALTER TABLE public.\"{}\" SET (autovacuum_enabled = off, toast.autovacuum_enabled = off)",
            t.relname
        ))
        .execute(&mut pg)?;
    }
    diesel::sql_query("SELECT pg_stat_reset()").execute(&mut pg)?;
    let author = Keys::generate();
    let owner = Keys::generate();
    let mut ows = bench.user(&owner).await?;
    let mut ws = bench.user(&author).await?;
    let ch = create_channel(&mut ows, &owner, "general").await?;
    join(&mut ws, &author, &ch).await?;
    let events = sign_all(
        (0..args.roots)
            .map(|_| (author.clone(), 9, vec![tag(&["h", &ch])], now()))
            .collect(),
    );
    println!(
        "{}: plans: {} top-level messages, autovacuum off for {} tables, read-state plugin {}",
        bench.backend,
        args.roots,
        tables.len(),
        if args.without_plugin { "off" } else { "on" }
    );
    let mut rates = Vec::new();
    for (i, block) in events.chunks(1_000).enumerate() {
        let began = Instant::now();
        flood(&mut ws, block, 50).await?;
        let rate = block.len() as f64 / began.elapsed().as_secs_f64();
        println!("  block {:>2}: {rate:.0} msgs/s", i + 1);
        rates.push(rate);
    }
    if let (Some(first), Some(last)) = (rates.first(), rates.last()) {
        println!(
            "  first 1k {first:.0} msgs/s, last 1k {last:.0} msgs/s (last/first {:.2})",
            last / first
        );
    }
    // Statistics are flushed within a second of a transaction's end.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let stats: Vec<TableStat> = diesel::sql_query(
        "SELECT relname::TEXT AS relname, COALESCE(seq_scan, 0) AS seq_scan, \
         COALESCE(seq_tup_read, 0) AS seq_tup_read, COALESCE(idx_scan, 0) AS idx_scan, \
         COALESCE(idx_tup_fetch, 0) AS idx_tup_fetch \
         FROM pg_stat_user_tables WHERE schemaname = 'public' ORDER BY seq_tup_read DESC",
    )
    .load(&mut pg)?;
    println!(
        "  table                          seq_scan   seq_tup_read     idx_scan  idx_tup_fetch"
    );
    for s in stats.iter().filter(|s| s.seq_scan > 0 || s.idx_scan > 0) {
        println!(
            "  {:<28} {:>10} {:>14} {:>12} {:>14}",
            s.relname, s.seq_scan, s.seq_tup_read, s.idx_scan, s.idx_tup_fetch
        );
    }
    let indexes: Vec<IndexStat> = diesel::sql_query(
        "SELECT indexrelname::TEXT AS indexrelname, COALESCE(idx_scan, 0) AS idx_scan, \
         COALESCE(idx_tup_read, 0) AS idx_tup_read FROM pg_stat_user_indexes \
         WHERE schemaname = 'public' AND idx_scan > 0 ORDER BY idx_tup_read DESC",
    )
    .load(&mut pg)?;
    println!("  index                                    idx_scan   idx_tup_read");
    for i in &indexes {
        println!(
            "  {:<38} {:>10} {:>14}",
            i.indexrelname, i.idx_scan, i.idx_tup_read
        );
    }
    ws.close().await;
    ows.close().await;
    bench.stop(rt).await
}
