use std::time::Instant;
use roaring::RoaringBitmap;
fn time_runs(name: &str, bm: &RoaringBitmap) {
    let t = Instant::now();
    let mut it = bm.iter(); let mut n = 0u64;
    while let Some(r) = it.next_range() { n += *r.end() as u64; }
    println!("{name} next_range {:?} {} {:?}", t.elapsed(), n, bm.statistics().n_bitset_containers);
}
fn main() {
    let mut a = RoaringBitmap::new();
    for v in (1..1_000_000u32).step_by(2) { a.insert(v); }
    time_runs("insert", &a);
    let mut b = RoaringBitmap::new();
    b.append((1..1_000_000u32).step_by(2)).unwrap();
    time_runs("append", &b);
    let mut c = a.clone(); c.optimize();
    time_runs("optimized", &c);
    time_runs("insert again", &a);
}
