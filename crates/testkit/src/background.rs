//! [`Background`]: a loopback listener served on a runtime of its own, on a thread of
//! its own, until dropped; what lets synchronous tests (ones that block on the `gyre`
//! binary) use the testkit's servers.

use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdTcpListener};

use tokio::net::TcpListener;

use crate::TestkitError;

/// Binds `127.0.0.1:port` (0: random), non-blocking, ready for tokio.
pub(crate) fn bind(port: u16) -> Result<(StdTcpListener, SocketAddr), TestkitError> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let bind_error = |error| TestkitError::Bind { addr, error };
    let listener = StdTcpListener::bind(addr).map_err(bind_error)?;
    listener.set_nonblocking(true).map_err(bind_error)?;
    let local = listener.local_addr().map_err(bind_error)?;
    Ok((listener, local))
}

/// A listener on `127.0.0.1` served by a runtime on its own thread; dropping it stops both.
#[derive(Debug)]
pub(crate) struct Background {
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    /// Binds `127.0.0.1:port` (0: a random port) and serves it with `serve` on a
    /// current-thread runtime of its own, on a thread named after `name` and the port.
    pub(crate) fn spawn<F, Fut>(name: &str, port: u16, serve: F) -> Result<Self, TestkitError>
    where
        F: FnOnce(TcpListener) -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        let (std_listener, addr) = bind(port)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(TestkitError::Runtime)?;
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(std_listener)
                .map_err(|error| TestkitError::Bind { addr, error })?
        };
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("gyre-testkit-{name}-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::select! {
                        () = serve(listener) => {}
                        _ = stop => {}
                    }
                });
            })
            .map_err(TestkitError::Runtime)?;
        Ok(Self {
            addr,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
