//! Which of a spec's own user-namespace mappings the host ID pool accepts (issue 16
//! item 3): those that containerd 2.1 and the kubelet write for `hostUsers: false`
//! pods, `podman --uidmap`, or any bundle's `linux.uidMappings`/`gidMappings`. Pure,
//! so the rules are unit-tested; [`super::idpool::IdPool::hold_spec`] applies them
//! under the pool lock.
//!
//! Two refusals:
//! - **Too wide.** A mapping that covers more IDs of the pool than `[userns]
//!   max_size` (the cap on `io.siloc.userns.size` too): recorded, it would block every
//!   range it covers while it lives (`0 1 4294967294` blocks the whole pool), and one
//!   container must not take the host's pool. Host IDs outside the pool block nothing
//!   and are not counted. Raise `max_size` to allow such a mapping.
//! - **Overlapping a range siloc handed out.** A mapping that overlaps an `auto` range
//!   another live container holds would share that container's host IDs, which siloc
//!   promised to nobody else. The one exception is the pod: a container that joins
//!   the range holder's own user namespace by path (`linux.namespaces` `user` with a
//!   `path`) and repeats its range exactly (the same uid and gid spans): a pod's app
//!   containers join their sandbox's namespace, and containerd's CRI and siloc's shim
//!   repeat the sandbox's mappings in their specs. Joining a namespace gives the
//!   container no new host IDs (the kernel uses the joined namespace's mapping), so
//!   the range stays the sandbox's. Creating a new namespace with the same range,
//!   joining another namespace with it (containerd 2.1 makes the user namespace of a
//!   `hostUsers: false` sandbox itself and hands over its path), or joining with a
//!   different or partly overlapping mapping, is refused.
//!
//! Not refused: a mapping overlapping another container's spec mapping. Both came
//! from the callers (the kubelet keeps its pods' ranges apart; a podman user may share
//! one on purpose), and siloc handed out neither.

use super::idpool::{Entry, Kind, Pool, Span};

/// Why a spec mapping is refused (the caller adds the mapping's text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The `uid` (or gid) mapping covers `covered` IDs of the pool, above the cap.
    TooWide { uid: bool, covered: u64 },
    /// The `uid` (or gid) mapping overlaps `entry`, an `auto` range of another
    /// container.
    Overlaps { uid: bool, entry: Entry },
}

/// How many IDs of `[start, start + size)` the `spans` cover (spans may overlap each
/// other; each ID counts once).
pub(crate) fn covered(spans: &[Span], start: u32, size: u32) -> u64 {
    let (lo, hi) = (u64::from(start), u64::from(start) + u64::from(size));
    let mut v: Vec<(u64, u64)> = spans
        .iter()
        .map(|s| (u64::from(s.host).max(lo), end(s).min(hi)))
        .filter(|(a, b)| a < b)
        .collect();
    v.sort_unstable();
    let (mut total, mut reach) = (0u64, lo);
    for (a, b) in v {
        let a = a.max(reach);
        if b > a {
            total += b - a;
            reach = b;
        }
    }
    total
}

fn end(s: &Span) -> u64 {
    u64::from(s.host) + u64::from(s.size)
}

/// Whether any span of `a` shares a host ID with any span of `b`.
fn overlap(a: &[Span], b: &[Span]) -> bool {
    a.iter().any(|x| {
        b.iter().any(|y| {
            x.size > 0 && y.size > 0 && u64::from(x.host) < end(y) && u64::from(y.host) < end(x)
        })
    })
}

/// Whether two span lists are the same set of spans (order aside, empty ones ignored).
fn same(a: &[Span], b: &[Span]) -> bool {
    let norm = |v: &[Span]| {
        let mut v: Vec<(u32, u32)> = v
            .iter()
            .filter(|s| s.size > 0)
            .map(|s| (s.host, s.size))
            .collect();
        v.sort_unstable();
        v
    };
    norm(a) == norm(b)
}

/// Checks the host side of a spec's mappings (`uid`, `gid` spans) against the pool
/// and the live `others` (every entry but the new holder's): the cap first, then the
/// overlap rule of the module doc. `joins`: `Some` when the spec joins a user
/// namespace by path, saying whether that namespace is the given entry's holder's.
///
/// Errors: the first [`Refusal`] found, uid before gid.
pub(crate) fn check(
    others: &[Entry],
    pool: Pool,
    cap: u32,
    uid: &[Span],
    gid: &[Span],
    joins: Option<&dyn Fn(&Entry) -> bool>,
) -> Result<(), Refusal> {
    for (is_uid, spans, start) in [(true, uid, pool.uid_start), (false, gid, pool.gid_start)] {
        let n = covered(spans, start, pool.size);
        if n > u64::from(cap) {
            return Err(Refusal::TooWide {
                uid: is_uid,
                covered: n,
            });
        }
    }
    for e in others.iter().filter(|e| e.kind == Kind::Auto) {
        let hits = (overlap(uid, &e.uid), overlap(gid, &e.gid));
        if hits == (false, false) {
            continue;
        }
        if same(uid, &e.uid) && same(gid, &e.gid) && joins.is_some_and(|owns| owns(e)) {
            continue;
        }
        return Err(Refusal::Overlaps {
            uid: hits.0,
            entry: e.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: Pool = Pool {
        uid_start: 100_000,
        gid_start: 200_000,
        size: 8 * 65536,
    };

    /// Joins the namespace of whichever entry is asked about.
    const JOINS_HOLDERS: Option<&dyn Fn(&Entry) -> bool> = Some(&|_| true);

    fn sp(host: u32, size: u32) -> Vec<Span> {
        vec![Span { host, size }]
    }

    fn auto(id: &str, uid: u32, gid: u32) -> Entry {
        Entry {
            root: "/other".into(),
            id: id.into(),
            kind: Kind::Auto,
            uid: sp(uid, 65536),
            gid: sp(gid, 65536),
        }
    }

    #[test]
    fn covered_counts_pool_ids_once() {
        assert_eq!(covered(&sp(1, u32::MAX - 1), 100_000, 524_288), 524_288);
        assert_eq!(covered(&sp(0, 100_000), 100_000, 10), 0, "below the pool");
        assert_eq!(covered(&sp(99_990, 20), 100_000, 10), 10, "straddling");
        let two = [sp(100_000, 10)[0], sp(100_005, 10)[0], sp(100_100, 1)[0]];
        assert_eq!(covered(&two, 100_000, 1000), 16, "overlapping lines");
        assert_eq!(covered(&[], 100_000, 1000), 0);
    }

    /// `1:4294967294` (container 0 → host 1, every ID but 0 and -1) covers the whole
    /// pool: refused under a cap below the pool's size, accepted when the cap allows
    /// it; a wide
    /// mapping outside the pool blocks nothing and is accepted.
    #[test]
    fn a_mapping_wider_than_the_cap_within_the_pool_is_refused() {
        let huge = sp(1, u32::MAX - 1);
        let small = sp(5_000_000, 65536);
        assert_eq!(
            check(&[], POOL, 65536 * 4, &huge, &small, None),
            Err(Refusal::TooWide {
                uid: true,
                covered: u64::from(POOL.size)
            })
        );
        assert_eq!(
            check(&[], POOL, 65536 * 4, &small, &huge, None),
            Err(Refusal::TooWide {
                uid: false,
                covered: u64::from(POOL.size)
            })
        );
        assert_eq!(check(&[], POOL, POOL.size, &huge, &huge, None), Ok(()));
        // 10 million IDs past the pool's end: none of the pool's
        let far = sp(POOL.gid_start + POOL.size, 10_000_000);
        assert_eq!(check(&[], POOL, 65536, &far, &far, None), Ok(()));
        // exactly the cap is fine, one more is not
        let at_cap = sp(POOL.uid_start, 65536);
        assert_eq!(check(&[], POOL, 65536, &at_cap, &[], None), Ok(()));
        let over = sp(POOL.uid_start, 65537);
        assert!(check(&[], POOL, 65536, &over, &[], None).is_err());
    }

    /// A mapping overlapping another container's `auto` range is refused, in uids or
    /// in gids alone, unless it joins a namespace by path and repeats that range
    /// exactly (a pod's app container and its sandbox).
    #[test]
    fn an_overlap_with_a_handed_out_range_is_refused_unless_the_pod_joins_it() {
        let sandbox = auto("sandbox", 100_000, 200_000);
        let live = [sandbox.clone()];
        let (u, g) = (sp(100_000, 65536), sp(200_000, 65536));
        // the app container joining the sandbox's namespace with its range
        assert_eq!(check(&live, POOL, 1 << 20, &u, &g, JOINS_HOLDERS), Ok(()));
        // the same range joining a namespace that is not the sandbox's (containerd
        // 2.1's own for a hostUsers: false pod): it would share the sandbox's IDs
        let elsewhere: Option<&dyn Fn(&Entry) -> bool> = Some(&|_| false);
        assert!(check(&live, POOL, 1 << 20, &u, &g, elsewhere).is_err());
        // the same range in a new namespace: two namespaces would share host IDs
        assert_eq!(
            check(&live, POOL, 1 << 20, &u, &g, None),
            Err(Refusal::Overlaps {
                uid: true,
                entry: sandbox.clone()
            })
        );
        // joining, but only part of the range, or a gid range of its own
        for (uu, gg) in [
            (sp(100_000, 1000), g.clone()),
            (u.clone(), sp(200_000, 1000)),
            (sp(150_000, 65536), sp(250_000, 65536)),
        ] {
            assert!(
                check(&live, POOL, 1 << 20, &uu, &gg, JOINS_HOLDERS).is_err(),
                "{uu:?} {gg:?}"
            );
        }
        // gids alone overlap: named as the gid mapping
        let gid_only = check(
            &live,
            POOL,
            1 << 20,
            &sp(900_000, 10),
            &sp(265_535, 10),
            None,
        );
        assert_eq!(
            gid_only,
            Err(Refusal::Overlaps {
                uid: false,
                entry: sandbox.clone()
            })
        );
        // right next to it: no overlap
        let next = (sp(165_536, 65536), sp(265_536, 65536));
        assert_eq!(check(&live, POOL, 1 << 20, &next.0, &next.1, None), Ok(()));
        // another container's spec mapping is not a handed-out range
        let mut spec = sandbox;
        spec.kind = Kind::Spec;
        assert_eq!(check(&[spec], POOL, 1 << 20, &u, &g, None), Ok(()));
    }
}
