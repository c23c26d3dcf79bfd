//! Checks the SigV4 signatures of the requests a [`TestServer`] received with an
//! implementation independent of gyre's: botocore's, from PyPI, in a venv made under
//! the target directory on first use (`python3 -m venv`, then pip) and reused after.
//!
//! Each request's signature is recomputed from what arrived (method, URL, the headers
//! its `SignedHeaders` names, the raw body, the `x-amz-date` it was signed at) with the
//! credentials the test gave gyre, and compared with the `Signature` it carried.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;

use crate::TestServer;

/// The botocore release the check is written against.
const BOTOCORE: &str = "botocore==1.44.5";

/// The AWS credentials a test gave gyre, and where it signs for.
#[derive(Debug, Clone)]
pub struct SigV4Check<'a> {
    /// The access key id.
    pub access_key_id: &'a str,
    /// The secret key.
    pub secret_access_key: &'a str,
    /// The session token, if the credentials are temporary.
    pub session_token: Option<&'a str>,
    /// The region signed for.
    pub region: &'a str,
    /// The service signed for (`bedrock`).
    pub service: &'a str,
}

const SCRIPT: &str = r#"
import base64, json, sys
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

job = json.load(sys.stdin)
creds = Credentials(job["access_key_id"], job["secret_access_key"], job.get("session_token"))
problems = []
for i, r in enumerate(job["requests"]):
    h = r["headers"]
    auth = h.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        problems.append(f"request {i}: not SigV4-signed: {auth!r}")
        continue
    fields = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    signed = fields["SignedHeaders"].split(";")
    scope = fields["Credential"].split("/")
    if scope[0] != job["access_key_id"] or scope[2:] != [job["region"], job["service"], "aws4_request"]:
        problems.append(f"request {i}: credential scope {fields['Credential']}")
    url = "http://" + h["host"] + r["path"] + ("?" + r["query"] if r.get("query") else "")
    req = AWSRequest(method=r["method"], url=url, data=base64.b64decode(r["body"]),
                     headers={k: h[k] for k in signed if k != "host"})
    req.context["timestamp"] = h["x-amz-date"]
    signer = SigV4Auth(creds, job["service"], job["region"])
    canonical = signer.canonical_request(req)
    expected = signer.signature(signer.string_to_sign(req, canonical), req)
    if signer.signed_headers(signer.headers_to_sign(req)) != fields["SignedHeaders"]:
        problems.append(f"request {i}: signed headers {fields['SignedHeaders']}")
    if expected != fields["Signature"]:
        problems.append(f"request {i}: signature {fields['Signature']} != botocore's {expected}\n{canonical}")
print(json.dumps({"checked": len(job["requests"]), "problems": problems}))
"#;

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    )
}

/// The venv's python with botocore importable, installing it when missing. Concurrent
/// tests each build in a directory of their own and the first to finish is renamed
/// into place.
fn botocore_python() -> Result<PathBuf, String> {
    let venv = target_dir().join("botocore-venv");
    let marker = venv.join(format!("{BOTOCORE}.installed"));
    if marker.is_file() {
        return Ok(venv.join("bin").join("python"));
    }
    let building = target_dir().join(format!("botocore-venv.{}", std::process::id()));
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{what}: {e} (python3 with venv is needed)"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{what} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&building),
        "python3 -m venv",
    )?;
    run(
        Command::new(building.join("bin").join("python")).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            BOTOCORE,
        ]),
        "pip install botocore",
    )?;
    std::fs::write(building.join(format!("{BOTOCORE}.installed")), "")
        .map_err(|e| e.to_string())?;
    if std::fs::rename(&building, &venv).is_err() {
        // Another test got there first.
        let _ = std::fs::remove_dir_all(&building);
    }
    if marker.is_file() {
        Ok(venv.join("bin").join("python"))
    } else {
        Err(format!("no botocore venv at {}", venv.display()))
    }
}

impl SigV4Check<'_> {
    /// Verifies every request `server` received; returns how many were checked.
    ///
    /// # Errors
    /// Each request whose signature botocore computes differently (with its canonical
    /// request), or why botocore could not be run.
    pub fn verify(&self, server: &TestServer) -> Result<usize, String> {
        let requests: Vec<serde_json::Value> = server
            .requests()
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let body = server.raw_body(i).unwrap_or_default();
                serde_json::json!({
                    "method": r.method,
                    "path": r.path,
                    "query": r.query,
                    "headers": r.headers,
                    "body": base64::engine::general_purpose::STANDARD.encode(&body),
                })
            })
            .collect();
        let job = serde_json::json!({
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "session_token": self.session_token,
            "region": self.region,
            "service": self.service,
            "requests": requests,
        });
        let python = botocore_python()?;
        let mut child = Command::new(python)
            .args(["-c", SCRIPT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("could not run botocore: {e}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write as _;
            stdin
                .write_all(job.to_string().as_bytes())
                .map_err(|e| e.to_string())?;
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|_| {
            format!(
                "botocore's check failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        let problems: Vec<String> = report["problems"]
            .as_array()
            .map(|p| {
                p.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if problems.is_empty() {
            Ok(usize::try_from(report["checked"].as_u64().unwrap_or(0)).unwrap_or(0))
        } else {
            Err(problems.join("\n"))
        }
    }
}
