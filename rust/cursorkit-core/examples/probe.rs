use cursorkit_core::RangeSet;
use std::time::Instant;
fn main() {
    let n = 1_000_000i64;
    let ls = vec![0i64; (n / 2) as usize];
    let es: Vec<i64> = (0..n).filter(|e| e % 2 == 1).collect();
    let mut rs = RangeSet::new(false);
    let t = Instant::now();
    rs.add_many(&ls, &es).unwrap();
    println!(
        "W2 bulk {:?} len {} mem {}",
        t.elapsed(),
        rs.len(),
        rs.memory_usage()
    );
    let t = Instant::now();
    let rows = rs.ranges_rows(None);
    println!("rows {:?} {}", t.elapsed(), rows.len());
    rs.compact();
    println!("after compact mem {}", rs.memory_usage());
    let t = Instant::now();
    let rows = rs.ranges_rows(None);
    println!("rows {:?} {}", t.elapsed(), rows.len());
    let l1 = vec![0i64; n as usize];
    let e1: Vec<i64> = (0..n).collect();
    let mut rs = RangeSet::new(false);
    let t = Instant::now();
    rs.add_many(&l1, &e1).unwrap();
    println!(
        "W1 bulk {:?} len {} mem {}",
        t.elapsed(),
        rs.len(),
        rs.memory_usage()
    );
    let t = Instant::now();
    let c = rs.contains_many(&l1, &e1).unwrap();
    println!("contains_many {:?} {}", t.elapsed(), c.len());
}
