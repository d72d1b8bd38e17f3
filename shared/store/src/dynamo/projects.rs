//! Projects in the main table.

use agentplane_domain::ProjectId;
use agentplane_domain::page::{Page, PageRequest, created_sort_key};
use agentplane_domain::project::Project;
use serde::{Deserialize, Serialize};

use super::keys::{PROJECT_SK, PROJECTS_LIST, project_pk};
use super::page::created_after;
use super::put_new;
use crate::{Store, StoreError};

#[derive(Serialize, Deserialize)]
struct ProjectItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(rename = "GSI1PK")]
    gsi1pk: String,
    #[serde(rename = "GSI1SK")]
    gsi1sk: String,
    #[serde(flatten)]
    project: Project,
}

pub struct Projects<'a> {
    store: &'a Store,
}

impl<'a> Projects<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    pub async fn create(&self, project: &Project) -> Result<(), StoreError> {
        let item = ProjectItem {
            pk: project_pk(&project.id),
            sk: PROJECT_SK.into(),
            gsi1pk: PROJECTS_LIST.into(),
            gsi1sk: created_sort_key(project.created_at, &project.id),
            project: project.clone(),
        };
        put_new(self.store, &self.store.names.main_table, item).await
    }

    pub async fn get(&self, id: &ProjectId) -> Result<Project, StoreError> {
        let item = self.raw(id).await?;
        let item: ProjectItem = serde_dynamo::from_item(item)?;
        Ok(item.project)
    }

    async fn raw(&self, id: &ProjectId) -> Result<super::page::Item, StoreError> {
        super::get_item(self.store, &self.store.names.main_table, project_pk(id), PROJECT_SK)
            .await?
            .ok_or(StoreError::NotFound)
    }

    /// A page of all projects. An `after` that names no project is `NotFound`.
    pub async fn list(
        &self,
        page: &PageRequest,
        after: Option<&ProjectId>,
    ) -> Result<Page<Project>, StoreError> {
        let after = after.map(|id| self.raw(id));
        created_after(self.store, PROJECTS_LIST, after, page, |i: ProjectItem| i.project).await
    }
}
