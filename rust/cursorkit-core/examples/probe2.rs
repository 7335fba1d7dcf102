use cursorkit_core::RangeSet;
use std::time::Instant;
fn main() {
    let mut rs = RangeSet::new(false);
    let t = Instant::now();
    rs.add_open_closed(0, -1, 0, u32::MAX as i64, None).unwrap();
    println!("add full {:?}", t.elapsed());
    let t = Instant::now();
    let b = rs.ledger_to_bytes(0).unwrap();
    println!("ledger_to_bytes {:?} {}", t.elapsed(), b.len());
    let t = Instant::now();
    let r = rs.ranges_flat(None);
    println!("ranges {:?} {}", t.elapsed(), r.len());
    let t = Instant::now();
    let c = rs.cardinality(0, 0, 0, 1 << 31).unwrap();
    println!("card {:?} {c}", t.elapsed());
    let t = Instant::now();
    rs.remove_at_most(0, 1 << 31).unwrap();
    println!("remove_at_most {:?}", t.elapsed());
    let t = Instant::now();
    rs.remove_open_closed(0, 1 << 31, 0, (1 << 31) + (1 << 30))
        .unwrap();
    println!("remove_oc {:?}", t.elapsed());
}
