//! `siloc update` under load: parallel updates keep every limit and the saved spec.

use crate::common::{Container, TestEnv};

#[test]
fn parallel_updates_keep_every_limit_and_the_saved_spec_whole() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("upd");
    let c = Container::start(&env, &b, &id);
    let saved = env
        .root
        .join(".siloc/containers")
        .join(&id)
        .join("config.json");
    for round in 0..10u64 {
        let flags = [
            ("--pids-limit", format!("{}", 200 + round)),
            ("--memory", format!("{}M", 100 + round)),
            ("--cpu-share", format!("{}", 500 + round)),
        ];
        std::thread::scope(|s| {
            for (flag, value) in &flags {
                let env = &env;
                let id = &id;
                s.spawn(move || {
                    let o = env.siloc(&["update", flag, value, id]);
                    assert!(
                        o.status.success(),
                        "round {round}: update {flag} {value}: {}",
                        String::from_utf8_lossy(&o.stderr)
                    );
                });
            }
        });
        // Each update used to write the saved spec in place: parallel ones left it
        // with trailing bytes, and every later update and exec failed to parse it.
        let text = std::fs::read_to_string(&saved).unwrap();
        let spec: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("round {round}: saved spec corrupt: {e}"));
        let r = &spec["linux"]["resources"];
        assert_eq!(
            (
                r["pids"]["limit"].as_u64(),
                r["memory"]["limit"].as_u64(),
                r["cpu"]["shares"].as_u64()
            ),
            (
                Some(200 + round),
                Some((100 + round) << 20),
                Some(500 + round)
            ),
            "round {round}: an update was lost"
        );
    }
    let (code, _, err) = c.exec(&["true"]);
    assert_eq!(code, 0, "exec after the updates: {err}");
    drop(c);
    env.assert_no_trace(&id);
}
