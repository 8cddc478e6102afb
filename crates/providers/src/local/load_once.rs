//! A local model's weights, loaded once on first use and shared by every clone of its provider or reranker:
//! an async caller loads them off the runtime (a load reads hundreds of megabytes), a blocking caller (tools,
//! benchmarks, tests) in its own thread. The embedding providers (folder and GGUF) and both local rerankers hold
//! their model this way.

use std::sync::Arc;

use tokio::sync::OnceCell;

pub(crate) struct LoadOnce<T>(Arc<OnceCell<Arc<T>>>);

impl<T> Clone for LoadOnce<T> {
    fn clone(&self) -> Self {
        LoadOnce(self.0.clone())
    }
}

impl<T: Send + Sync + 'static> LoadOnce<T> {
    pub fn new() -> Self {
        LoadOnce(Arc::new(OnceCell::new()))
    }

    pub fn is_loaded(&self) -> bool {
        self.0.initialized()
    }

    /// The model, loaded by `load` on a blocking thread the first time; `lost` says why when that thread died.
    pub async fn get<E: Send + 'static>(
        &self,
        load: impl FnOnce() -> Result<T, E> + Send + 'static,
        lost: impl FnOnce(String) -> E,
    ) -> Result<Arc<T>, E> {
        self.0
            .get_or_try_init(|| async move {
                tokio::task::spawn_blocking(move || load().map(Arc::new)).await.map_err(|e| lost(format!("model load task failed: {e}")))?
            })
            .await
            .cloned()
    }

    /// The model, loaded by `load` in this thread the first time.
    pub fn get_blocking<E>(&self, load: impl FnOnce() -> Result<T, E>) -> Result<Arc<T>, E> {
        if let Some(m) = self.0.get() {
            return Ok(m.clone());
        }
        let m = Arc::new(load()?);
        // Another thread may have set it meanwhile: both loads are the same model.
        let _ = self.0.set(m.clone());
        Ok(m)
    }
}
