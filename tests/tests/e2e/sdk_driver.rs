//! Runs `tests/sdk/sdk_driver.py`: gyre driven as a subprocess the way Claude Code's
//! Agent SDKs drive `claude -p --output-format stream-json --verbose`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

#[test]
fn an_sdk_style_python_driver_reads_every_line_as_json_in_the_expected_sequence() {
    let python = ["python3", "python"].into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let python =
        python.expect("no python3 on PATH: this test needs Python 3 (apt-get install python3)");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/sdk/sdk_driver.py");
    let out = Command::new(python)
        .arg(script)
        .arg("--gyre")
        .arg(gyre_e2e::gyre_binary().unwrap())
        .arg("--testkit")
        .arg(gyre_e2e::testkit_binary().unwrap())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("3 passed, 0 failed"), "{stdout}");
}
