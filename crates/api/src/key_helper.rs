//! Running settings' `apiKeyHelper` and keeping its output for its TTL.
//!
//! The key lives in this process's memory only: it is never put in an environment
//! variable, so no program gyre starts (Bash, hooks, MCP servers) can see it.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::ApiError;
use crate::client::KeyHelper;

/// The reference gives a helper this long before it counts as failed.
const HELPER_TIMEOUT: Duration = Duration::from_secs(60);

/// A [`KeyHelper`] and the key it printed last, shared by a client's clones and forks.
#[derive(Debug)]
pub(crate) struct CachedKey {
    helper: KeyHelper,
    /// The key and when it was printed; a `tokio` mutex, so that concurrent requests wait
    /// for one run of the helper instead of starting one each.
    current: tokio::sync::Mutex<Option<(String, Instant)>>,
}

impl CachedKey {
    pub(crate) fn new(helper: KeyHelper) -> Self {
        Self {
            helper,
            current: tokio::sync::Mutex::new(None),
        }
    }

    /// The key: the cached one while its TTL lasts, else the helper's output now.
    pub(crate) async fn get(&self) -> Result<String, ApiError> {
        let mut current = self.current.lock().await;
        if let Some((key, at)) = current.as_ref()
            && at.elapsed() < self.helper.ttl
        {
            return Ok(key.clone());
        }
        let key = run(&self.helper).await?;
        *current = Some((key.clone(), Instant::now()));
        Ok(key)
    }

    /// Forgets the key (the API refused it with a 401): the next request runs the helper.
    pub(crate) async fn invalidate(&self) {
        *self.current.lock().await = None;
    }
}

async fn run(helper: &KeyHelper) -> Result<String, ApiError> {
    let failed = |message: String| ApiError::Credentials {
        source_name: format!("apiKeyHelper `{}`", helper.command),
        message,
    };
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&helper.command)
        .current_dir(&helper.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed(format!("it could not be started: {e}")))?;
    let output = tokio::time::timeout(HELPER_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| {
            failed(format!(
                "it printed no key within {} s",
                HELPER_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|e| failed(format!("it could not be run: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said: String = stderr.trim().chars().take(500).collect();
        return Err(failed(format!(
            "it exited with {}{}; fix the command in settings' apiKeyHelper",
            output.status,
            if said.is_empty() {
                String::new()
            } else {
                format!(" and said: {said}")
            }
        )));
    }
    let key = String::from_utf8(output.stdout)
        .map_err(|_| failed("its output is not UTF-8".to_owned()))?
        .trim()
        .to_owned();
    if key.is_empty() {
        return Err(failed(
            "it printed nothing; it must print the API key on stdout".to_owned(),
        ));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn helper(command: &str, ttl: Duration) -> (tempfile::TempDir, CachedKey) {
        let dir = tempfile::tempdir().unwrap();
        let helper = KeyHelper {
            command: command.to_owned(),
            cwd: dir.path().to_path_buf(),
            ttl,
        };
        (dir, CachedKey::new(helper))
    }

    #[tokio::test]
    async fn the_output_is_kept_for_the_ttl_and_rerun_after_invalidate() {
        // Each run appends a line to `runs` and prints `key-<number of runs>`.
        let (dir, cached) = helper(
            "echo x >> runs; echo \"key-$(wc -l < runs | tr -d ' ')\"",
            Duration::from_secs(3600),
        );
        assert_eq!(cached.get().await.unwrap(), "key-1");
        assert_eq!(cached.get().await.unwrap(), "key-1");
        cached.invalidate().await;
        assert_eq!(cached.get().await.unwrap(), "key-2");
        let runs = std::fs::read_to_string(dir.path().join("runs")).unwrap();
        assert_eq!(runs.lines().count(), 2);
    }

    #[tokio::test]
    async fn an_expired_key_runs_the_helper_again() {
        let (_dir, cached) = helper(
            "echo x >> runs; echo \"key-$(wc -l < runs | tr -d ' ')\"",
            Duration::ZERO,
        );
        assert_eq!(cached.get().await.unwrap(), "key-1");
        assert_eq!(cached.get().await.unwrap(), "key-2");
    }

    #[tokio::test]
    async fn a_failing_or_silent_helper_is_a_credentials_error_that_says_why() {
        let (_dir, cached) = helper("echo 'vault is sealed' >&2; exit 3", Duration::ZERO);
        let err = cached.get().await.unwrap_err();
        assert_eq!(err.category(), "credentials");
        assert!(!err.is_retryable());
        let text = err.to_string();
        assert!(text.contains("vault is sealed"), "{text}");
        assert!(text.contains("apiKeyHelper"), "{text}");

        let (_dir, cached) = helper("true", Duration::ZERO);
        let text = cached.get().await.unwrap_err().to_string();
        assert!(text.contains("printed nothing"), "{text}");
    }
}
