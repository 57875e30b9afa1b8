//! Python's `frozenset(cursor.fetchall())`, which skyrl-gym builds from
//! every query result: its distinct rows and the order it iterates them in.
//!
//! The order is CPython's (3.12 and later) hash-table order, reproduced
//! exactly: the hashes of `int`, `float`, `None`, `str`, `bytes` and tuples,
//! open addressing with 9 linear probes then perturbation, and the table
//! growth of `set_add_entry` / `set_table_resize`. `str` and `bytes` hash
//! with SipHash-1-3 under the key `PYTHONHASHSEED=0` sets (all zeros): without
//! a seed Python picks a random key per process, so skyrl-gym shows text
//! rows in a different order every run, and this order is the one it shows
//! under `PYTHONHASHSEED=0`. Python before 3.12 hashed `None` by address; 3.12
//! made it the constant [`NONE_HASH`].

use std::hash::Hasher;

use rusqlite::types::Value;
use siphasher::sip::SipHasher13;

use crate::reward::Key;

/// `hash(None)` since CPython 3.12.
pub const NONE_HASH: i64 = 0xFCA8_6420;
/// The modulus of CPython's numeric hash, 2⁶¹ − 1.
const MODULUS: u64 = (1 << 61) - 1;
/// `hash(float('inf'))`.
const INF_HASH: i64 = 314_159;
/// Slots checked linearly before a perturbed jump (`LINEAR_PROBES`).
const LINEAR_PROBES: usize = 9;
/// `PERTURB_SHIFT`.
const PERTURB_SHIFT: u32 = 5;
/// `PySet_MINSIZE`: a new set's table size.
const MIN_SIZE: usize = 8;

/// A hash of -1 means "error" in CPython, so every hash function maps it to -2.
fn not_minus_one(h: i64) -> i64 {
    if h == -1 {
        -2
    } else {
        h
    }
}

/// `hash(int)`: the value modulo 2⁶¹ − 1, keeping the sign.
pub fn hash_int(i: i64) -> i64 {
    let residue = (i.unsigned_abs() % MODULUS) as i64;
    not_minus_one(if i < 0 { -residue } else { residue })
}

/// `hash(float)`: the exact value modulo 2⁶¹ − 1 (so integral floats hash
/// like ints), keeping the sign. SQLite never returns NaN.
pub fn hash_float(f: f64) -> i64 {
    if f.is_infinite() {
        return if f > 0.0 { INF_HASH } else { -INF_HASH };
    }
    if f == 0.0 || f.is_nan() {
        return 0;
    }
    let bits = f.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    // |f| = mantissa · 2^exponent exactly.
    let (mantissa, exponent) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1 << 52), biased - 1075)
    };
    // 2⁶¹ ≡ 1 (mod 2⁶¹ − 1): multiplying by 2^e is a 61-bit rotation.
    let e = exponent.rem_euclid(61) as u32;
    let x = mantissa % MODULUS;
    let x = if e == 0 {
        x
    } else {
        ((x << e) & MODULUS) | (x >> (61 - e))
    };
    not_minus_one(if f < 0.0 { -(x as i64) } else { x as i64 })
}

/// `_Py_HashBytes` with `PYTHONHASHSEED=0`: SipHash-1-3 under a zero key.
fn hash_buffer(bytes: &[u8]) -> i64 {
    if bytes.is_empty() {
        return 0;
    }
    let mut hasher = SipHasher13::new_with_keys(0, 0);
    hasher.write(bytes);
    not_minus_one(hasher.finish() as i64)
}

/// `hash(str)`: the hash of the string's CPython storage, one, two or four
/// little-endian bytes per code point depending on the largest one.
pub fn hash_str(s: &str) -> i64 {
    let widest = s.chars().map(u32::from).max().unwrap_or(0);
    let bytes: Vec<u8> = if widest < 0x100 {
        s.chars().map(|c| u32::from(c) as u8).collect()
    } else if widest < 0x1_0000 {
        s.chars()
            .flat_map(|c| (u32::from(c) as u16).to_le_bytes())
            .collect()
    } else {
        s.chars().flat_map(|c| u32::from(c).to_le_bytes()).collect()
    };
    hash_buffer(&bytes)
}

/// `hash(bytes)`.
pub fn hash_bytes(b: &[u8]) -> i64 {
    hash_buffer(b)
}

/// The hash of one value as Python's `sqlite3` returns it.
pub fn hash_value(value: &Value) -> i64 {
    match value {
        Value::Null => NONE_HASH,
        Value::Integer(i) => hash_int(*i),
        Value::Real(f) => hash_float(*f),
        Value::Text(s) => hash_str(s),
        Value::Blob(b) => hash_bytes(b),
    }
}

/// `hash(tuple)`: CPython's xxHash-based tuple hash over the items' hashes.
pub fn hash_row(row: &[Value]) -> i64 {
    const PRIME_1: u64 = 11_400_714_785_074_694_791;
    const PRIME_2: u64 = 14_029_467_366_897_019_727;
    const PRIME_5: u64 = 2_870_177_450_012_600_261;
    let mut acc = PRIME_5;
    for value in row {
        let lane = hash_value(value) as u64;
        acc = acc.wrapping_add(lane.wrapping_mul(PRIME_2));
        acc = acc.rotate_left(31);
        acc = acc.wrapping_mul(PRIME_1);
    }
    acc = acc.wrapping_add((row.len() as u64) ^ (PRIME_5 ^ 3_527_539));
    if acc == u64::MAX {
        return 1_546_275_796;
    }
    acc as i64
}

/// One occupied slot: the row's hash and its index in the input.
#[derive(Clone, Copy)]
struct Slot {
    hash: i64,
    row: usize,
}

/// The indices of `rows`' distinct rows (Python equality: `1 == 1.0`), in
/// the order `frozenset(rows)` iterates them. Of equal rows the first is kept,
/// as Python keeps the first key it inserted.
pub fn frozenset_order(rows: &[Vec<Value>]) -> Vec<usize> {
    let keys: Vec<Vec<Key>> = rows
        .iter()
        .map(|row| row.iter().map(Key::from).collect())
        .collect();
    let mut table: Vec<Option<Slot>> = vec![None; MIN_SIZE];
    let mut used = 0usize;
    for (index, row) in rows.iter().enumerate() {
        let hash = hash_row(row);
        if !add(&mut table, &keys, Slot { hash, row: index }) {
            continue;
        }
        used += 1;
        // No deletions, so fill == used.
        let mask = table.len() - 1;
        if used * 5 >= mask * 3 {
            table = resize(&table, if used > 50_000 { used * 2 } else { used * 4 });
        }
    }
    table.iter().flatten().map(|slot| slot.row).collect()
}

/// `set_add_entry` without the resize: inserts `new` unless an equal row is
/// present; returns whether it inserted.
fn add(table: &mut [Option<Slot>], keys: &[Vec<Key>], new: Slot) -> bool {
    let mask = table.len() - 1;
    let mut perturb = new.hash as u64;
    let mut i = (new.hash as u64 as usize) & mask;
    loop {
        let probes = if i + LINEAR_PROBES <= mask {
            LINEAR_PROBES
        } else {
            0
        };
        for entry in &mut table[i..=i + probes] {
            match entry {
                None => {
                    *entry = Some(new);
                    return true;
                }
                Some(slot) if slot.hash == new.hash && keys[slot.row] == keys[new.row] => {
                    return false;
                }
                Some(_) => {}
            }
        }
        i = next_probe(i, &mut perturb, mask);
    }
}

/// The slot probed after the linear run at `i`: `perturb` shifts down and
/// mixes in, `i = (i * 5 + 1 + perturb) & mask`.
fn next_probe(i: usize, perturb: &mut u64, mask: usize) -> usize {
    *perturb >>= PERTURB_SHIFT;
    i.wrapping_mul(5)
        .wrapping_add(1)
        .wrapping_add(*perturb as usize)
        & mask
}

/// `set_table_resize`: a table of the smallest power of two above
/// `min_used` (at least [`MIN_SIZE`]), refilled in the old table's order
/// by `set_insert_clean`.
fn resize(old: &[Option<Slot>], min_used: usize) -> Vec<Option<Slot>> {
    let mut size = MIN_SIZE;
    while size <= min_used {
        size <<= 1;
    }
    let mask = size - 1;
    let mut table: Vec<Option<Slot>> = vec![None; size];
    for slot in old.iter().flatten() {
        let mut perturb = slot.hash as u64;
        let mut i = (slot.hash as u64 as usize) & mask;
        'probe: loop {
            if table[i].is_none() {
                table[i] = Some(*slot);
                break;
            }
            if i + LINEAR_PROBES <= mask {
                if let Some(free) = table[i + 1..=i + LINEAR_PROBES]
                    .iter_mut()
                    .find(|entry| entry.is_none())
                {
                    *free = Some(*slot);
                    break 'probe;
                }
            }
            i = next_probe(i, &mut perturb, mask);
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    // Values printed by CPython 3.12 under PYTHONHASHSEED=0.
    #[test]
    fn hashes_match_cpython() {
        assert_eq!(hash_int(-1), -2);
        assert_eq!(hash_int(5), 5);
        assert_eq!(hash_int(1 << 61), 1);
        assert_eq!(hash_float(1.5), 1_152_921_504_606_846_977);
        assert_eq!(hash_float(3.0), 3);
        assert_eq!(hash_float(-1.0), -2);
        assert_eq!(hash_str("ab"), 6_148_830_537_548_944_441);
        assert_eq!(hash_bytes(b"ab"), 6_148_830_537_548_944_441);
        assert_eq!(hash_str(""), 0);
        assert_eq!(
            hash_row(&[Value::Integer(1), Value::Text("a".into()), Value::Null]),
            4_343_034_631_408_724_324
        );
    }

    #[test]
    fn small_int_rows_iterate_in_cpython_order() {
        let rows: Vec<Vec<Value>> = (0..20).map(|i| vec![Value::Integer(i)]).collect();
        let order = frozenset_order(&rows);
        assert_eq!(&order[..6], &[2, 5, 11, 8, 14, 17]);
        assert_eq!(order.len(), 20);
    }

    #[test]
    fn equal_rows_are_kept_once() {
        let rows = vec![
            vec![Value::Integer(1)],
            vec![Value::Real(1.0)],
            vec![Value::Integer(2)],
        ];
        let mut order = frozenset_order(&rows);
        order.sort_unstable();
        assert_eq!(order, vec![0, 2]);
    }
}
